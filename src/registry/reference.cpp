#include "registry/reference.hpp"

#include <algorithm>
#include <cctype>

#include "boxlite/images.hpp"
#include "common/error.hpp"

namespace boxlite::registry {

namespace {

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw Error(ErrorKind::InvalidArgument, "invalid image reference '" + text + "': " + why);
}

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A path component: [a-z0-9]+ joined by ".", "_", "__" or "-"+ (docker's grammar).
bool valid_component(const std::string& c) {
  if (c.empty() || !is_lower_alnum(c.front()) || !is_lower_alnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    if (is_lower_alnum(ch) || ch == '-') continue;
    if (ch == '.' || ch == '_') {
      if (!is_lower_alnum(c[i - 1]) && !(ch == '_' && c[i - 1] == '_' && i >= 2 && is_lower_alnum(c[i - 2])))
        return false;
      continue;
    }
    return false;
  }
  return true;
}

bool valid_tag(const std::string& t) {
  if (t.empty() || t.size() > 128) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!word(t[0])) return false;
  for (char c : t) {
    if (!word(c) && c != '.' && c != '-') return false;
  }
  return true;
}

// host[:port]: dot-separated labels of letters, digits and inner hyphens, or a
// bracketed IPv6 address; the port is digits.
bool valid_domain(const std::string& d) {
  if (d.empty() || d.size() > 255) return false;
  std::string host = d, port;
  size_t colon = d.rfind(':');
  if (colon != std::string::npos && d.find(']', colon) == std::string::npos) {
    host = d.substr(0, colon);
    port = d.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return std::all_of(host.begin() + 1, host.end() - 1,
                       [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':'; });
  }
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    std::string label = host.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

bool looks_like_domain(const std::string& first) {
  return first.find('.') != std::string::npos || first.find(':') != std::string::npos || first == "localhost";
}

}  // namespace

bool is_sha256_digest(const std::string& d) {
  if (d.size() != 7 + 64 || d.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < d.size(); ++i) {
    char c = d[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string ImageRef::str() const {
  std::string out = registry.empty() ? repository : registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

ImageRef parse_reference(const std::string& text) {
  if (text.empty()) bad(text, "empty");
  if (text.size() > 1024) bad(text.substr(0, 64) + "...", "longer than 1024 characters");
  ImageRef ref;
  std::string rest = text;
  if (auto at = rest.find('@'); at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest.resize(at);
    if (!is_sha256_digest(ref.digest)) bad(text, "the digest must be sha256: followed by 64 lowercase hex digits");
  }
  // A tag is after the last ':' that comes after the last '/' (a port is before it).
  auto slash = rest.rfind('/');
  auto colon = rest.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = rest.substr(colon + 1);
    rest.resize(colon);
    if (!valid_tag(ref.tag)) bad(text, "invalid tag '" + ref.tag + "'");
  }
  if (auto first = rest.find('/'); first != std::string::npos && looks_like_domain(rest.substr(0, first))) {
    ref.registry = rest.substr(0, first);
    rest = rest.substr(first + 1);
    if (!valid_domain(ref.registry)) bad(text, "invalid registry host '" + ref.registry + "'");
    if (ref.registry == "index.docker.io" || ref.registry == "registry-1.docker.io") ref.registry = kDefaultRegistry;
  }
  if (rest.empty()) bad(text, "no repository name");
  size_t start = 0;
  while (true) {
    auto end = rest.find('/', start);
    std::string comp = rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!valid_component(comp)) {
      bad(text, "invalid repository name component '" + comp + "' (lowercase letters, digits and separators . _ __ -)");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  ref.repository = rest;
  if (ref.registry == kDefaultRegistry && ref.repository.find('/') == std::string::npos)
    ref.repository = "library/" + ref.repository;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

ImageRef on_registry(const ImageRef& ref, const std::string& registry_host) {
  ImageRef out = ref;
  out.registry = registry_host == "index.docker.io" ? kDefaultRegistry : registry_host;
  if (out.repository.find('/') == std::string::npos) out.repository = "library/" + out.repository;
  return out;
}

}  // namespace boxlite::registry

namespace boxlite {

ImageReferenceParts parse_image_reference(const std::string& text) {
  registry::ImageRef r = registry::parse_reference(text);
  return {r.registry, r.repository, r.tag, r.digest};
}

}  // namespace boxlite
