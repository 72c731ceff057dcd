// Connection's insides, for the server (which accepts sockets) and connection.cpp only: Asio's
// headers stay out of everything else.
#pragma once

#include <asio.hpp>

#include <atomic>
#include <string>

namespace ls::remote {

struct Connection::Impl {
    asio::io_context io;
    asio::ip::tcp::socket socket{io};
    std::string peer;
    std::atomic<uint64_t> sent{0}, received{0};
    std::atomic<int> fd{-1};  // for shutdown() from another thread; -1 once closed
};

// The peer's address as "HOST:PORT".
std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint);
// Marks a descriptor close-on-exec: a command the server starts never holds its sockets.
void set_cloexec(int fd);

}  // namespace ls::remote
