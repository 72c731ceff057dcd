// One TCP connection carrying frames (engine/remote/wire.h), on standalone Asio. Every read and
// write has a deadline: a peer that stops reading or writing costs a timeout, never a hang.
// One thread uses a Connection at a time; shutdown() may come from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/remote/wire.h"
#include "engine/util/result.h"

namespace ls::remote {

struct Frame {
    MsgType type;
    std::string payload;
};

// "HOST:PORT" ("[::1]:7070" for IPv6) into its parts; port 0 only when `allow_zero`.
Result<std::pair<std::string, uint16_t>> split_address(const std::string& address, bool allow_zero);
// 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

// TLS settings (engine/remote/connection_impl.h); a server makes one from its identity.
struct TlsContext;
// The server's side: its key and certificate (PEM, as engine/remote/tls.h makes them), TLS 1.3.
Result<std::shared_ptr<TlsContext>> make_server_tls(const std::string& identity_pem);

class Connection {
public:
    struct Impl;
    explicit Connection(std::unique_ptr<Impl> impl);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Connects to HOST:PORT within `timeout`; the error says what failed and what to check. With
    // `tls_sha256` (a certificate's fingerprint, engine/remote/tls.h) the connection speaks TLS 1.3
    // and is refused unless the server's certificate has that fingerprint.
    static Result<std::unique_ptr<Connection>> connect(const std::string& address, std::chrono::milliseconds timeout,
                                                       const std::string& tls_sha256 = {});
    // The server's side of TLS, before anything else is read: the client's first bytes must open a
    // TLS handshake (a plain hello is answered with a plain Refused frame saying why), and the
    // handshake must finish within `timeout`.
    Status accept_tls(const std::shared_ptr<TlsContext>& context, std::chrono::milliseconds timeout);
    // Bytes of a frame already taken off the socket (decrypted, not handed out yet): a receive
    // will not wait for the socket, though poll() on native_handle() says nothing is there.
    bool has_buffered() const;

    Status send(MsgType type, std::string_view payload, std::chrono::milliseconds timeout = std::chrono::seconds(60));
    // The next frame; refused when its header says more than `limit` bytes (before any
    // allocation), on a bad header, when the peer closes, or after `timeout` (0: none).
    Result<Frame> receive(uint32_t limit, std::chrono::milliseconds timeout);
    // Stops the connection from any thread: a receive or send under way fails at once.
    void shutdown();
    int native_handle() const;
    const std::string& peer() const;
    uint64_t bytes_sent() const;
    uint64_t bytes_received() const;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace ls::remote
