#include "engine/remote/connection.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>

#include "engine/remote/connection_impl.h"

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

std::string why(const asio::error_code& ec) {
    if (ec == asio::error::eof) return "the other side closed the connection";
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

Result<std::unique_ptr<Connection>> Connection::connect(const std::string& address, std::chrono::milliseconds timeout) {
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
    return std::make_unique<Connection>(std::move(impl));
}

Status Connection::send(MsgType type, std::string_view payload, std::chrono::milliseconds timeout) {
    const std::string frame = make_frame(type, payload);
    const asio::error_code ec = run_op(*impl_, timeout, [&](auto handler) {
        asio::async_write(impl_->socket, asio::buffer(frame), handler);
    });
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the connection to {} was lost while sending: {}", impl_->peer, why(ec)));
    impl_->sent += frame.size();
    return {};
}

Result<Frame> Connection::receive(uint32_t limit, std::chrono::milliseconds timeout) {
    uint8_t header[kHeaderBytes];
    asio::error_code ec = run_op(*impl_, timeout, [&](auto handler) {
        asio::async_read(impl_->socket, asio::buffer(header, sizeof header), handler);
    });
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("the connection to {} was lost: {}", impl_->peer, why(ec)));
    auto parsed = parse_frame_header(header, limit);
    if (!parsed) return make_error(ErrorCode::kBadInput, fmt::format("{} sent {}", impl_->peer, parsed.error().message));
    Frame frame{parsed.value().type, std::string(parsed.value().length, '\0')};
    if (!frame.payload.empty()) {
        ec = run_op(*impl_, timeout, [&](auto handler) {
            asio::async_read(impl_->socket, asio::buffer(frame.payload), handler);
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
