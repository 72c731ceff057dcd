// Connection's insides, for the server (which accepts sockets) and connection.cpp only: Asio's
// headers stay out of everything else.
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

namespace ls::remote {

// The socket under TLS, read no further than the end of the current TLS record: what OpenSSL has
// not asked for stays in the socket, where poll() sees it. (Asio's TLS stream reads ahead into a
// buffer of its own, and a frame waiting there would wait for the next byte to arrive.)
class RecordStream {
public:
    using executor_type = asio::ip::tcp::socket::executor_type;
    using lowest_layer_type = asio::ip::tcp::socket::lowest_layer_type;

    explicit RecordStream(asio::ip::tcp::socket& socket) : socket_(socket) {}
    executor_type get_executor() { return socket_.get_executor(); }
    lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }
    const lowest_layer_type& lowest_layer() const { return socket_.lowest_layer(); }

    template <class Buffers, class Handler>
    void async_write_some(const Buffers& buffers, Handler&& handler) {
        socket_.async_write_some(buffers, std::forward<Handler>(handler));
    }
    template <class Buffers, class Handler>
    void async_read_some(const Buffers& buffers, Handler&& handler) {
        const asio::mutable_buffer first = *asio::buffer_sequence_begin(buffers);
        const size_t limit = left_ > 0 ? left_ : kHeader - have_;
        auto* data = static_cast<unsigned char*>(first.data());
        socket_.async_read_some(asio::buffer(first.data(), std::min(first.size(), limit)),
                                [this, data, h = std::forward<Handler>(handler)](const asio::error_code& ec, size_t n) mutable {
                                    account(data, n);
                                    h(ec, n);
                                });
    }

private:
    // A record: type (1 byte), version (2), length (2, big-endian), then the length's bytes.
    static constexpr size_t kHeader = 5;
    void account(const unsigned char* data, size_t n) {
        if (left_ > 0) {
            left_ -= n;
            return;
        }
        for (size_t i = 0; i < n; ++i) header_[have_++] = data[i];
        if (have_ == kHeader) {
            left_ = (static_cast<size_t>(header_[3]) << 8) | header_[4];
            have_ = 0;
        }
    }
    asio::ip::tcp::socket& socket_;
    unsigned char header_[kHeader] = {};
    size_t have_ = 0, left_ = 0;
};

// TLS settings: a server's (its certificate and key, shared by its connections) or a client's.
struct TlsContext {
    explicit TlsContext(asio::ssl::context::method method) : context(method) {}
    asio::ssl::context context;
};

struct Connection::Impl {
    asio::io_context io;
    asio::ip::tcp::socket socket{io};
    std::shared_ptr<TlsContext> tls_context;  // kept alive while `tls` uses it
    std::unique_ptr<asio::ssl::stream<RecordStream>> tls;  // set once a TLS handshake has started
    std::string peer;
    std::atomic<uint64_t> sent{0}, received{0};
    std::atomic<int> fd{-1};  // for shutdown() from another thread; -1 once closed
};

// The peer's address as "HOST:PORT".
std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint);
// Marks a descriptor close-on-exec: a command the server starts never holds its sockets.
void set_cloexec(int fd);

}  // namespace ls::remote
