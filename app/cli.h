// The command-line definitions (CLI11) shared by main.cpp and the server, which parses the
// arguments a client sends with the same definitions before it checks their paths.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "app/commands.h"

namespace ls::app {

// An output path given as "" would silently write nothing.
extern const CLI::Validator kNonEmptyPath;

// --llama-isa, the same flag wherever a model runs in llama mode. `automatic` says what auto picks.
void add_llama_isa_option(CLI::App* cmd, std::string& value, const char* automatic);

void add_run_command(CLI::App& app, RunOptions& o);
void add_compare_command(CLI::App& app, CompareOptions& o);
void add_export_command(CLI::App& app, ExportCmdOptions& o);

// --remote HOST:PORT and --token-file, on the commands that can run on a server. Only main.cpp
// adds them: the server's parser refuses them (a server never relays to another).
void add_remote_options(CLI::App* cmd, RemoteFlags& r);

}  // namespace ls::app
