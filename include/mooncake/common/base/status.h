// mooncake-rs: upstream Mooncake's `mooncake::Status` (common/base/status.h), the
// result type of the C++ Transfer Engine API (transfer_engine.h). Header-only: the
// codes and names are upstream's; the implementation is this project's.
//
// A code is the magnitude of the C API's negative ERR_* value it stands for
// (kInvalidArgument = 1 for ERR_INVALID_ARGUMENT = -1, kMetadata = 200 for -200, ...).
#ifndef MOONCAKE_RS_STATUS_H
#define MOONCAKE_RS_STATUS_H

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace mooncake {

/// The outcome of an operation: OK, or an error code with a message.
class Status final {
   public:
    /// Upstream's status codes.
    enum class Code : uint16_t {
        kOk = 0,
        kInvalidArgument = 1,
        kTooManyRequests = 2,
        kAddressNotRegistered = 3,
        kBatchBusy = 4,
        kDeviceNotFound = 6,
        kAddressOverlapped = 7,
        kNotSupportedTransport = 8,
        kDns = 101,
        kSocket = 102,
        kMalformedJson = 103,
        kRejectHandshake = 104,
        kMetadata = 200,
        kEndpoint = 201,
        kContext = 202,
        kNuma = 300,
        kClock = 301,
        kMemory = 302,
        kNotImplemented = 999,
        kMaxCode
    };

    /// An OK status.
    Status() = default;

    /// A status with `code` and `message` (the message is dropped when `code` is kOk).
    Status(Code code, std::string_view message)
        : code_(code), message_(code == Code::kOk ? std::string() : std::string(message)) {}

    Status(const Status&) = default;
    Status& operator=(const Status&) = default;
    Status(Status&&) noexcept = default;
    Status& operator=(Status&&) noexcept = default;
    ~Status() = default;

    /// The code.
    Code code() const { return code_; }

    /// The message (empty when OK).
    std::string_view message() const { return message_; }

    /// Whether this is OK.
    [[nodiscard]] bool ok() const { return code_ == Code::kOk; }

    [[nodiscard]] bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
    [[nodiscard]] bool IsTooManyRequests() const { return code_ == Code::kTooManyRequests; }
    [[nodiscard]] bool IsAddressNotRegistered() const {
        return code_ == Code::kAddressNotRegistered;
    }
    [[nodiscard]] bool IsBatchBusy() const { return code_ == Code::kBatchBusy; }
    [[nodiscard]] bool IsDeviceNotFound() const { return code_ == Code::kDeviceNotFound; }
    [[nodiscard]] bool IsAddressOverlapped() const { return code_ == Code::kAddressOverlapped; }
    [[nodiscard]] bool IsDns() const { return code_ == Code::kDns; }
    [[nodiscard]] bool IsSocket() const { return code_ == Code::kSocket; }
    [[nodiscard]] bool IsMalformedJson() const { return code_ == Code::kMalformedJson; }
    [[nodiscard]] bool IsRejectHandshake() const { return code_ == Code::kRejectHandshake; }
    [[nodiscard]] bool IsMetadata() const { return code_ == Code::kMetadata; }
    [[nodiscard]] bool IsEndpoint() const { return code_ == Code::kEndpoint; }
    [[nodiscard]] bool IsContext() const { return code_ == Code::kContext; }
    [[nodiscard]] bool IsNuma() const { return code_ == Code::kNuma; }
    [[nodiscard]] bool IsClock() const { return code_ == Code::kClock; }
    [[nodiscard]] bool IsMemory() const { return code_ == Code::kMemory; }
    [[nodiscard]] bool IsNotImplemented() const { return code_ == Code::kNotImplemented; }
    [[nodiscard]] bool IsNotSupportedTransport() const {
        return code_ == Code::kNotSupportedTransport;
    }

    /// The code's name and the message, e.g. `InvalidArgument: bad batch id`.
    std::string ToString() const {
        std::string out(CodeToString(code_));
        if (!ok() && !message_.empty()) {
            out += ": ";
            out += message_;
        }
        return out;
    }

    /// Equal when code and message are.
    bool operator==(const Status& s) const { return code_ == s.code_ && message_ == s.message_; }
    bool operator!=(const Status& s) const { return !(*this == s); }

    static Status OK() { return Status(); }
    static Status InvalidArgument(std::string_view msg) {
        return Status(Code::kInvalidArgument, msg);
    }
    static Status TooManyRequests(std::string_view msg) {
        return Status(Code::kTooManyRequests, msg);
    }
    static Status AddressNotRegistered(std::string_view msg) {
        return Status(Code::kAddressNotRegistered, msg);
    }
    static Status BatchBusy(std::string_view msg) { return Status(Code::kBatchBusy, msg); }
    static Status DeviceNotFound(std::string_view msg) {
        return Status(Code::kDeviceNotFound, msg);
    }
    static Status AddressOverlapped(std::string_view msg) {
        return Status(Code::kAddressOverlapped, msg);
    }
    static Status Dns(std::string_view msg) { return Status(Code::kDns, msg); }
    static Status Socket(std::string_view msg) { return Status(Code::kSocket, msg); }
    static Status MalformedJson(std::string_view msg) {
        return Status(Code::kMalformedJson, msg);
    }
    static Status RejectHandshake(std::string_view msg) {
        return Status(Code::kRejectHandshake, msg);
    }
    static Status Metadata(std::string_view msg) { return Status(Code::kMetadata, msg); }
    static Status Endpoint(std::string_view msg) { return Status(Code::kEndpoint, msg); }
    static Status Context(std::string_view msg) { return Status(Code::kContext, msg); }
    static Status Numa(std::string_view msg) { return Status(Code::kNuma, msg); }
    static Status Clock(std::string_view msg) { return Status(Code::kClock, msg); }
    static Status Memory(std::string_view msg) { return Status(Code::kMemory, msg); }
    static Status NotImplemented(std::string_view msg) {
        return Status(Code::kNotImplemented, msg);
    }
    static Status NotSupportedTransport(std::string_view msg) {
        return Status(Code::kNotSupportedTransport, msg);
    }

    /// The name of `code` (`OK`, `InvalidArgument`, ...).
    static std::string_view CodeToString(Code code) {
        switch (code) {
            case Code::kOk: return "OK";
            case Code::kInvalidArgument: return "InvalidArgument";
            case Code::kTooManyRequests: return "TooManyRequests";
            case Code::kAddressNotRegistered: return "AddressNotRegistered";
            case Code::kBatchBusy: return "BatchBusy";
            case Code::kDeviceNotFound: return "DeviceNotFound";
            case Code::kAddressOverlapped: return "AddressOverlapped";
            case Code::kNotSupportedTransport: return "NotSupportedTransport";
            case Code::kDns: return "Dns";
            case Code::kSocket: return "Socket";
            case Code::kMalformedJson: return "MalformedJson";
            case Code::kRejectHandshake: return "RejectHandshake";
            case Code::kMetadata: return "Metadata";
            case Code::kEndpoint: return "Endpoint";
            case Code::kContext: return "Context";
            case Code::kNuma: return "Numa";
            case Code::kClock: return "Clock";
            case Code::kMemory: return "Memory";
            case Code::kNotImplemented: return "NotImplemented";
            case Code::kMaxCode: break;
        }
        return "Unknown";
    }

   private:
    Code code_ = Code::kOk;
    std::string message_;
};

/// Writes `s.ToString()`.
inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

/// Writes the code's name.
inline std::ostream& operator<<(std::ostream& os, Status::Code code) {
    return os << Status::CodeToString(code);
}

}  // namespace mooncake

#endif  // MOONCAKE_RS_STATUS_H
