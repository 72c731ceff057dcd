// The time from a command to the snapshot that shows it, and the bytes a stepped token costs, for
// a session on a server: what a key press in the GUI waits for before the panels update.
//   bench_remote HOST:PORT TOKEN_FILE MODEL (the server's path) [STEPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engine/remote/access.h"
#include "engine/remote/remote_session.h"

int main(int argc, char** argv) {
    using namespace ls::remote;
    using namespace std::chrono;
    if (argc < 4) {
        std::fprintf(stderr, "usage: bench_remote HOST:PORT TOKEN_FILE MODEL [STEPS]\n");
        return 2;
    }
    const int steps = argc > 4 ? std::atoi(argv[4]) : 20;
    auto credentials = read_credentials(argv[2]);
    if (!credentials) return std::fprintf(stderr, "bench_remote: %s\n", credentials.error().message.c_str()), 3;
    ClientOptions options;
    options.tls_sha256 = credentials.value().tls_sha256;
    Open open;
    open.model = argv[3];
    open.backend = "cpu";
    open.tokens = {1, 403, 407, 261, 378};
    auto session = RemoteSession::open(argv[1], credentials.value().token, open, options);
    if (!session) return std::fprintf(stderr, "bench_remote: %s\n", session.error().message.c_str()), 3;
    RemoteSession& r = *session.value();
    std::vector<double> ms;
    // What the panels wait for: from the key press (the command queued) to the first snapshot
    // standing at the next event.
    for (int i = 0; i < steps; ++i) {
        const int64_t from = r.snapshot()->cursor;
        const auto start = steady_clock::now();
        const uint64_t request = r.step_op();
        while (r.snapshot()->cursor == from) {
            if (steady_clock::now() - start > seconds(60) || !r.connected())
                return std::fprintf(stderr, "bench_remote: step %d did not complete\n", i), 3;
            std::this_thread::sleep_for(microseconds(50));
        }
        ms.push_back(duration<double, std::milli>(steady_clock::now() - start).count());
        if (!r.wait_command(request, seconds(60))) return std::fprintf(stderr, "bench_remote: step %d was refused\n", i), 3;
    }
    std::sort(ms.begin(), ms.end());
    const uint64_t before = r.bytes_received();
    auto done = r.wait_command(r.step_token(), seconds(60));
    auto snap = done ? r.wait_for_ticket(done.value().ticket, seconds(60)) : nullptr;
    if (!snap) return std::fprintf(stderr, "bench_remote: the token step did not complete\n"), 3;
    std::printf("step op to updated snapshot: median %.1f ms, max %.1f ms (%d steps); rest of the decode call "
                "(%lld events): %llu bytes\n",
                ms[ms.size() / 2], ms.back(), steps, static_cast<long long>(snap->cursor + 1 - steps),
                static_cast<unsigned long long>(r.bytes_received() - before));
    (void)r.close();
    return 0;
}
