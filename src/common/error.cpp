#include "common/error.hpp"

namespace boxlite {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Ok: return "Ok";
    case ErrorCode::Internal: return "Internal";
    case ErrorCode::NotFound: return "NotFound";
    case ErrorCode::AlreadyExists: return "AlreadyExists";
    case ErrorCode::InvalidState: return "InvalidState";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::Config: return "Config";
    case ErrorCode::Storage: return "Storage";
    case ErrorCode::Image: return "Image";
    case ErrorCode::Network: return "Network";
    case ErrorCode::Execution: return "Execution";
    case ErrorCode::Stopped: return "Stopped";
    case ErrorCode::Engine: return "Engine";
    case ErrorCode::Unsupported: return "Unsupported";
    case ErrorCode::Database: return "Database";
    case ErrorCode::Portal: return "Portal";
    case ErrorCode::Rpc: return "Rpc";
    case ErrorCode::RpcTransport: return "RpcTransport";
    case ErrorCode::Metadata: return "Metadata";
    case ErrorCode::UnsupportedEngine: return "UnsupportedEngine";
    case ErrorCode::ResourceExhausted: return "ResourceExhausted";
    case ErrorCode::SessionReaped: return "SessionReaped";
  }
  return "Unknown";
}

}  // namespace boxlite
