// Errors as values: every operation a user's input can fail returns Result<T>.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ls {

enum class ErrorCode {
    kUsage = 2,      // bad flag or argument
    kBadInput = 3,   // unreadable or malformed file
    kIo = 4,         // could not write
    kUnsupported = 5,
    kInternal = 70,
};

struct Error {
    ErrorCode code = ErrorCode::kInternal;
    std::string message;  // what is wrong, where, and what to do
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { assert(ok()); return std::get<0>(v_); }
    const T& value() const& { assert(ok()); return std::get<0>(v_); }
    T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    const Error& error() const { assert(!ok()); return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

// Result of an operation with no value.
class [[nodiscard]] Status {
public:
    Status() = default;
    Status(Error error) : error_(std::move(error)), ok_(false) {}
    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return error_; }

private:
    Error error_;
    bool ok_ = true;
};

}  // namespace ls
