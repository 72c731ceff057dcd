#include "engine/remote/connection.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>

#include "engine/remote/connection_impl.h"
#include "engine/remote/tls.h"

namespace ls::remote {
namespace {

// Runs the asynchronous operation `start` began on `impl.io` until it completes or `timeout`
// passes (0: no limit); a timeout closes the socket, which ends the operation.
template <class Start>
asio::error_code run_op(Connection::Impl& impl, std::chrono::milliseconds timeout, Start start) {
    asio::error_code result = asio::error::would_block;
    bool done = false;
    start([&](const asio::error_code& ec, size_t) {
        result = ec;
        done = true;
    });
    impl.io.restart();
    if (timeout.count() > 0) impl.io.run_for(timeout);
    else impl.io.run();
    if (!done) {
        asio::error_code ignored;
        impl.fd = -1;
        impl.socket.close(ignored);
        impl.io.restart();
        impl.io.run();
        return asio::error::timed_out;
    }
    return result;
}

// Calls f with the stream frames travel on: the TLS stream once a handshake has started, else the socket.
template <class F>
void on_stream(Connection::Impl& impl, F&& f) {
    if (impl.tls) f(*impl.tls);
    else f(impl.socket);
}

std::string why(const asio::error_code& ec) {
    // Over TLS a peer that closes without a close_notify alert (every close here) truncates the stream.
    if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return "the other side closed the connection";
    if (ec == asio::error::timed_out) return "timed out";
    return ec.message();
}

}  // namespace

std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint) {
    const asio::ip::address a = endpoint.address();
    return a.is_v6() ? fmt::format("[{}]:{}", a.to_string(), endpoint.port()) : fmt::format("{}:{}", a.to_string(), endpoint.port());
}

void set_cloexec(int fd) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

Result<std::pair<std::string, uint16_t>> split_address(const std::string& address, bool allow_zero) {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
        return make_error(ErrorCode::kUsage, fmt::format("'{}' is not HOST:PORT (e.g. 127.0.0.1:7070)", address));
    std::string host = address.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string port_text = address.substr(colon + 1);
    unsigned long port = 0;
    for (char c : port_text) {
        if (c < '0' || c > '9' || port > 65535) return make_error(ErrorCode::kUsage, fmt::format("'{}': the port is not a number from 1 to 65535", address));
        port = port * 10 + static_cast<unsigned long>(c - '0');
    }
    if (port > 65535 || (port == 0 && !allow_zero))
        return make_error(ErrorCode::kUsage, fmt::format("'{}': the port is not a number from 1 to 65535", address));
    return std::make_pair(host, static_cast<uint16_t>(port));
}

bool is_loopback_host(const std::string& host) {
    if (host == "localhost") return true;
    asio::error_code ec;
    const asio::ip::address a = asio::ip::make_address(host, ec);
    return !ec && a.is_loopback();
}

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
    impl_->fd = impl_->socket.native_handle();
}
Connection::~Connection() {
    asio::error_code ignored;
    impl_->fd = -1;
    impl_->socket.close(ignored);
}

Result<std::shared_ptr<TlsContext>> make_server_tls(const std::string& identity_pem) {
    auto tls = std::make_shared<TlsContext>(asio::ssl::context::tls_server);
    asio::error_code ec;
    SSL_CTX_set_min_proto_version(tls->context.native_handle(), TLS1_3_VERSION);
    // No session tickets: nothing but frames arrives after the handshake, so bytes that poll()
    // sees on the socket are always the start of a frame a receive can finish.
    SSL_CTX_set_num_tickets(tls->context.native_handle(), 0);
    tls->context.use_certificate_chain(asio::buffer(identity_pem), ec);
    if (!ec) tls->context.use_private_key(asio::buffer(identity_pem), asio::ssl::context::pem, ec);
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the TLS identity cannot be used: {}", ec.message()));
    return tls;
}

Result<std::unique_ptr<Connection>> Connection::connect(const std::string& address, std::chrono::milliseconds timeout,
                                                        const std::string& tls_sha256) {
    auto parts = split_address(address, false);
    if (!parts) return parts.error();
    auto impl = std::make_unique<Impl>();
    asio::error_code ec;
    asio::ip::tcp::resolver resolver(impl->io);
    const auto endpoints = resolver.resolve(parts.value().first, std::to_string(parts.value().second), ec);
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("cannot resolve {}: {}", parts.value().first, ec.message()));
    ec = run_op(*impl, timeout, [&](auto handler) {
        asio::async_connect(impl->socket, endpoints,
                            [handler](const asio::error_code& e, const asio::ip::tcp::endpoint&) mutable { handler(e, 0); });
    });
    if (ec) {
        const std::string hint = ec == asio::error::connection_refused
                                     ? " (is `layerscope serve` running there? Through an SSH tunnel: ssh -N -L "
                                       "7070:127.0.0.1:7070 HOST, then --remote 127.0.0.1:7070)"
                                     : "";
        return make_error(ErrorCode::kBadInput, fmt::format("cannot connect to {}: {}{}", address, why(ec), hint));
    }
    set_cloexec(impl->socket.native_handle());
    impl->socket.set_option(asio::ip::tcp::no_delay(true), ec);
    impl->peer = address;
    if (!tls_sha256.empty()) {
        // The server's certificate is self-signed and pinned: OpenSSL's chain check is off, the
        // fingerprint is compared once the handshake is done.
        impl->tls_context = std::make_shared<TlsContext>(asio::ssl::context::tls_client);
        SSL_CTX_set_min_proto_version(impl->tls_context->context.native_handle(), TLS1_3_VERSION);
        impl->tls_context->context.set_verify_mode(asio::ssl::verify_none);
        impl->tls = std::make_unique<asio::ssl::stream<RecordStream>>(RecordStream(impl->socket), impl->tls_context->context);
        ec = run_op(*impl, timeout, [&](auto handler) {
            impl->tls->async_handshake(asio::ssl::stream_base::client,
                                       [handler](const asio::error_code& e) mutable { handler(e, 0); });
        });
        if (ec)
            return make_error(ErrorCode::kBadInput,
                              fmt::format("the TLS handshake with {} failed: {} (the token file names the server's TLS "
                                          "certificate: is it serving with --tls, or on a non-loopback --listen?)",
                                          address, why(ec)));
        std::string presented;
        if (X509* cert = SSL_get1_peer_certificate(impl->tls->native_handle())) {
            presented = certificate_sha256(cert);
            X509_free(cert);
        }
        if (presented != tls_sha256)
            return make_error(ErrorCode::kBadInput,
                              fmt::format("the server at {} is not the one the token file names: its TLS certificate's "
                                          "fingerprint is {}, the token file's is {} (if its identity was made anew, copy "
                                          "its token file again)", address, presented.empty() ? "missing" : presented, tls_sha256));
    }
    return std::make_unique<Connection>(std::move(impl));
}

Status Connection::accept_tls(const std::shared_ptr<TlsContext>& context, std::chrono::milliseconds timeout) {
    Impl& impl = *impl_;
    unsigned char first = 0;
    asio::error_code ec = run_op(impl, timeout, [&](auto handler) {
        impl.socket.async_receive(asio::buffer(&first, 1), asio::socket_base::message_peek, handler);
    });
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("{} sent nothing: {}", impl.peer, why(ec)));
    constexpr unsigned char kTlsHandshakeRecord = 0x16;
    if (first != kTlsHandshakeRecord) {
        const std::string reason =
            "this server speaks TLS only, and the client's token file names no TLS certificate: copy the server's "
            "token file to the client again (it now holds a line tls-sha256)";
        (void)receive(kMaxHelloBytes, timeout);  // read first: closing on unread bytes would reset the connection
        const std::string frame = make_frame(MsgType::kRefused, encode(Refused{reason}));
        (void)run_op(impl, std::chrono::seconds(5), [&](auto handler) { asio::async_write(impl.socket, asio::buffer(frame), handler); });
        return make_error(ErrorCode::kBadInput, "a plain hello to a TLS server (its token file names no TLS certificate)");
    }
    impl.tls_context = context;
    impl.tls = std::make_unique<asio::ssl::stream<RecordStream>>(RecordStream(impl.socket), context->context);
    ec = run_op(impl, timeout, [&](auto handler) {
        impl.tls->async_handshake(asio::ssl::stream_base::server, [handler](const asio::error_code& e) mutable { handler(e, 0); });
    });
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the TLS handshake failed: {}", why(ec)));
    return {};
}

bool Connection::has_buffered() const { return impl_->tls && SSL_pending(impl_->tls->native_handle()) > 0; }

Status Connection::send(MsgType type, std::string_view payload, std::chrono::milliseconds timeout) {
    const std::string frame = make_frame(type, payload);
    const asio::error_code ec = run_op(*impl_, timeout, [&](auto handler) {
        on_stream(*impl_, [&](auto& stream) { asio::async_write(stream, asio::buffer(frame), handler); });
    });
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the connection to {} was lost while sending: {}", impl_->peer, why(ec)));
    impl_->sent += frame.size();
    return {};
}

Result<Frame> Connection::receive(uint32_t limit, std::chrono::milliseconds timeout) {
    uint8_t header[kHeaderBytes];
    asio::error_code ec = run_op(*impl_, timeout, [&](auto handler) {
        on_stream(*impl_, [&](auto& stream) { asio::async_read(stream, asio::buffer(header, sizeof header), handler); });
    });
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the connection to {} was lost: {}", impl_->peer, why(ec)));
    auto parsed = parse_frame_header(header, limit);
    if (!parsed) return make_error(ErrorCode::kBadInput, fmt::format("{} sent {}", impl_->peer, parsed.error().message));
    Frame frame{parsed.value().type, std::string(parsed.value().length, '\0')};
    if (!frame.payload.empty()) {
        ec = run_op(*impl_, timeout, [&](auto handler) {
            on_stream(*impl_, [&](auto& stream) { asio::async_read(stream, asio::buffer(frame.payload), handler); });
        });
        if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the connection to {} was lost: {}", impl_->peer, why(ec)));
    }
    impl_->received += sizeof header + frame.payload.size();
    return frame;
}

void Connection::shutdown() {
    const int fd = impl_->fd;
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}
int Connection::native_handle() const { return impl_->fd; }
const std::string& Connection::peer() const { return impl_->peer; }
uint64_t Connection::bytes_sent() const { return impl_->sent; }
uint64_t Connection::bytes_received() const { return impl_->received; }

}  // namespace ls::remote
