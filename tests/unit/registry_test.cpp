// Image references, registry configuration (the documented validation messages),
// WWW-Authenticate parsing, short-name candidates and the image store, without a
// network (tests/integration/registry_test.cpp pulls from real registries).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "common/error_kind.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "core/runtime.hpp"
#include "image/test_support.hpp"
#include "registry/config.hpp"
#include "registry/http.hpp"
#include "registry/manifest.hpp"
#include "registry/pull.hpp"
#include "registry/pull_wire.hpp"
#include "registry/reference.hpp"
#include "registry/store.hpp"

namespace boxlite::registry {
namespace {

using boxlite::testing::kind_of;

TEST(ReferenceTest, NormalizesDockerHubNames) {
  EXPECT_EQ(on_registry(parse_reference("alpine"), kDefaultRegistry).str(), "docker.io/library/alpine:latest");
  EXPECT_EQ(parse_reference("docker.io/alpine").str(), "docker.io/library/alpine:latest");
  EXPECT_EQ(parse_reference("index.docker.io/library/alpine:3").str(), "docker.io/library/alpine:3");
  EXPECT_EQ(parse_reference("python:slim").tag, "slim");
  EXPECT_FALSE(parse_reference("python:slim").qualified());
  EXPECT_EQ(parse_reference("org/app").repository, "org/app");
}

TEST(ReferenceTest, HostsPortsTagsAndDigests) {
  auto r = parse_reference("127.0.0.1:5000/test/busybox:v1.2");
  EXPECT_EQ(r.registry, "127.0.0.1:5000");
  EXPECT_EQ(r.repository, "test/busybox");
  EXPECT_EQ(r.tag, "v1.2");
  std::string d = "sha256:" + std::string(64, 'a');
  auto byd = parse_reference("localhost/app@" + d);
  EXPECT_EQ(byd.registry, "localhost");
  EXPECT_EQ(byd.digest, d);
  EXPECT_EQ(byd.tag, "");
  EXPECT_EQ(byd.manifest_reference(), d);
  EXPECT_EQ(byd.str(), "localhost/app@" + d);
  EXPECT_EQ(parse_reference("ghcr.io/a/b:t@" + d).str(), "ghcr.io/a/b:t@" + d);
}

TEST(ReferenceTest, RefusesBadReferences) {
  std::string msg;
  for (const char* bad : {"", "UPPER", "a//b", "a:", "a:-tag", "a@sha256:abc",
                          "a@md5:"
                          "0123",
                          "../x", "a b", "-a"}) {
    EXPECT_EQ(kind_of([&] { parse_reference(bad); }, &msg), ErrorKind::InvalidArgument) << bad;
    EXPECT_NE(msg.find("invalid image reference"), std::string::npos) << msg;
  }
  EXPECT_EQ(kind_of([&] { parse_reference(std::string(2000, 'a')); }), ErrorKind::InvalidArgument);
}

TEST(ReferenceTest, SearchCandidatesInOrder) {
  ImageRegistry a, b, c;
  a.host = "ghcr.io";
  a.search = true;
  b.host = "skip.example";
  c.host = "docker.io";
  c.search = true;
  auto list = candidates("alpine", {a, b, c});
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].str(), "ghcr.io/library/alpine:latest");  // as the reference system does
  EXPECT_EQ(list[1].str(), "docker.io/library/alpine:latest");
  EXPECT_EQ(candidates("quay.io/p/q:v1", {a, b, c}).size(), 1u);                     // qualified: the list is bypassed
  EXPECT_EQ(candidates("alpine", {b})[0].str(), "docker.io/library/alpine:latest");  // no search registry
  EXPECT_EQ(candidates("alpine", {})[0].str(), "docker.io/library/alpine:latest");
}

TEST(RegistryConfigTest, DocumentedValidationMessages) {
  auto msg_of = [](ImageRegistry r) {
    std::string m;
    EXPECT_EQ(kind_of([&] { validate(r); }, &m), ErrorKind::Config);
    return m;
  };
  ImageRegistry r;
  EXPECT_EQ(msg_of(r), "image registry host is required");
  r.host = "https://x";
  EXPECT_EQ(msg_of(r), "image registry host must be host[:port], not a URL: https://x");
  r.host = "x/y";
  EXPECT_EQ(msg_of(r), "image registry host must be host[:port], not a URL: x/y");
  r.host = "registry.local:5000";
  r.transport = "HTTP";
  EXPECT_EQ(msg_of(r), "unsupported registry transport: HTTP");
  r.transport = "http";
  r.username = "u";
  EXPECT_EQ(msg_of(r), "registry username and password must be provided together");
  r.username.reset();
  r.password = "p";
  EXPECT_EQ(msg_of(r), "registry username and password must be provided together");
  r.username = "u";
  r.bearer_token = "t";  // both kinds: accepted, the bearer token wins
  EXPECT_EQ(kind_of([&] { validate(r); }), std::nullopt);
}

TEST(RegistryConfigTest, RuntimeRefusesBadRegistries) {
  image::testing::ScratchDir scratch;
  const std::string tmp_dir = scratch.path();
  ImageRegistry r;
  r.host = "https://x";
  std::string msg;
  EXPECT_EQ(kind_of([&] { Runtime rt(RuntimeOptions{tmp_dir, {r}}); }, &msg), ErrorKind::Config);
  EXPECT_EQ(msg, "image registry host must be host[:port], not a URL: https://x");
  write_file_atomic(tmp_dir + "/config.json", R"({"image_registries":[{"host":"h","transport":"ftp"}]})");
  EXPECT_EQ(kind_of([&] { Runtime rt(RuntimeOptions{tmp_dir}); }, &msg), ErrorKind::Config);
  EXPECT_NE(msg.find("unsupported registry transport: ftp"), std::string::npos) << msg;
}

TEST(RegistryConfigTest, JsonAndFlagForms) {
  auto j = nlohmann::json::parse(R"([{"host":"a:1","transport":"http","skip_verify":true,"search":true,
                                     "username":"u","password":"p","bearer_token":"t"}])");
  auto regs = registries_from_json(j, "test");
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].host, "a:1");
  EXPECT_EQ(regs[0].transport, "http");
  EXPECT_TRUE(regs[0].skip_verify && regs[0].search);
  EXPECT_EQ(*regs[0].bearer_token, "t");
  std::string msg;
  EXPECT_EQ(kind_of([&] { registries_from_json(nlohmann::json::parse(R"([{"host":"a","serch":true}])"), "f"); }, &msg),
            ErrorKind::Config);
  EXPECT_NE(msg.find("unknown key 'serch'"), std::string::npos);
  EXPECT_EQ(kind_of([&] { registries_from_json(nlohmann::json::parse(R"([{"host":"a","search":"yes"}])"), "f"); }),
            ErrorKind::Config);

  auto f = parse_registry_flag("127.0.0.1:5000,transport=http,skip_verify");
  EXPECT_EQ(f.host, "127.0.0.1:5000");
  EXPECT_EQ(f.transport, "http");
  EXPECT_TRUE(f.skip_verify);
  EXPECT_TRUE(f.search) << "a --registry takes part in short-name search";
  EXPECT_FALSE(parse_registry_flag("h,search=false").search);
  EXPECT_EQ(kind_of([&] { parse_registry_flag("h,password=x"); }, &msg), ErrorKind::Config);
  EXPECT_NE(msg.find("credentials go in --config"), std::string::npos);
  EXPECT_EQ(kind_of([&] { parse_registry_flag("http://h"); }, &msg), ErrorKind::Config);
  EXPECT_EQ(msg, "image registry host must be host[:port], not a URL: http://h");
}

// What a registry serves, parsed by registry/manifest.hpp (the oci fuzz target's
// registry half): fields of the wrong JSON type are Image errors saying which.
TEST(ManifestTest, RegistryManifestsAreParsedAndCheckedFieldByField) {
  const std::string d = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(manifest_media_type(R"({"manifests": []})", "application/json", "x"),
            "application/vnd.oci.image.index.v1+json");
  EXPECT_EQ(manifest_media_type(R"({"mediaType": "application/vnd.docker.distribution.manifest.v2+json"})",
                                "application/vnd.oci.image.index.v1+json; charset=utf-8", "x"),
            "application/vnd.docker.distribution.manifest.v2+json");
  std::string msg;
  EXPECT_EQ(kind_of([&] { manifest_media_type(R"({"schemaVersion": 1})", "text/plain", "busybox"); }, &msg),
            ErrorKind::Image);
  EXPECT_EQ(msg, "busybox uses the Docker schema 1 manifest format, which is not supported");
  EXPECT_EQ(kind_of([&] { manifest_media_type("{", "", "busybox"); }), ErrorKind::Image);

  std::string index = R"({"manifests": [{"digest": ")" + d + R"(", "size": 1, "platform": {"os": "linux",
                      "architecture": "arm64"}}, {"digest": ")" +
                      d + R"(", "size": 2, "platform": {"os": "linux",
                      "architecture": "amd64"}}]})";
  EXPECT_EQ(amd64_manifest_digest(index, "index"), d);
  EXPECT_EQ(kind_of(
                [&] {
                  amd64_manifest_digest(R"({"manifests": [{"digest": ")" + d + R"(", "size": 1,
                                                "platform": {"os": 7}}]})",
                                        "index i");
                },
                &msg),
            ErrorKind::Image);
  EXPECT_EQ(msg, "field 'os' in index i is not a string");

  ImageManifest m = parse_image_manifest(R"({"config": {"digest": ")" + d + R"(", "size": 3}, "layers": [
      {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ")" +
                                             d + R"(", "size": 4}]})",
                                         "m");
  EXPECT_EQ(m.config.size, 3u);
  ASSERT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.layers[0].size, 4u);
  EXPECT_EQ(kind_of(
                [&] {
                  parse_image_manifest(R"({"config": {"digest": ")" + d + R"(", "size": 3,
                                               "mediaType": []}, "layers": []})",
                                       "manifest m");
                },
                &msg),
            ErrorKind::Image);
  EXPECT_EQ(msg, "field 'mediaType' in manifest m is not a string");
  EXPECT_EQ(kind_of([&] {
              parse_image_manifest(R"({"config": {"digest": ")" + d + R"(", "size": -3}, "layers": []})", "manifest m");
            }),
            ErrorKind::Image);
}

// boxlite-pull's answers are checked as any hostile input: a count that is a float
// (6e60 is undefined behaviour to convert) or negative is an Internal error.
TEST(PullWireTest, CountsInTheHelpersMessagesAreCheckedIntegers) {
  LayerProgress p{"sha256:x", 10, 5, false, false, 2};
  LayerProgress back = wire::progress_from(wire::progress_json(p));
  EXPECT_EQ(back.size, 10u);
  EXPECT_EQ(back.attempt, 2);
  for (const char* bad : {R"(6e60)", R"(-1)", R"(1.5)", R"("3")"}) {
    auto j = wire::progress_json(p);
    j["size"] = nlohmann::json::parse(bad);
    std::string msg;
    EXPECT_EQ(kind_of([&] { wire::progress_from(j); }, &msg), ErrorKind::Internal) << bad;
    EXPECT_NE(msg.find("'size'"), std::string::npos) << msg;
  }
  auto j = wire::progress_json(p);
  j["attempt"] = 5000000000u;
  EXPECT_EQ(kind_of([&] { wire::progress_from(j); }), ErrorKind::Internal);
}

TEST(ChallengeTest, ParsesBearerAndBasic) {
  auto c = parse_challenge(
      R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push")");
  EXPECT_EQ(c.scheme, "bearer");
  EXPECT_EQ(c.param("realm"), "https://auth.docker.io/token");
  EXPECT_EQ(c.param("service"), "registry.docker.io");
  EXPECT_EQ(c.param("scope"), "repository:a/b:pull,push");
  auto b = parse_challenge(R"(Basic realm="x \"q\"")");
  EXPECT_EQ(b.scheme, "basic");
  EXPECT_EQ(b.param("realm"), "x \"q\"");
  EXPECT_EQ(parse_challenge("Bearer").params.size(), 0u);
  EXPECT_EQ(parse_challenge("Bearer realm=unquoted,service=s").param("service"), "s");
}

TEST(ImageStoreTest, TagLookupListUntagCollect) {
  image::testing::ScratchDir scratch;
  const std::string tmp_dir = scratch.path();
  ImageStore s(tmp_dir + "/images");
  std::string layer = s.put_blob("layer bytes"), config = s.put_blob("{}");
  std::string manifest =
      nlohmann::json{{"config", {{"digest", config}, {"size", 2}}}, {"layers", {{{"digest", layer}, {"size", 11}}}}}
          .dump();
  std::string md = s.put_blob(manifest);
  EXPECT_FALSE(s.lookup("r/x:latest"));
  s.tag("r/x:latest", md, "application/vnd.oci.image.manifest.v1+json", manifest.size());
  EXPECT_EQ(s.lookup("r/x:latest"), md);
  s.tag("r/x:latest", md, "application/vnd.oci.image.manifest.v1+json", manifest.size());  // retag: one entry
  ASSERT_EQ(s.list().size(), 1u);
  EXPECT_EQ(s.list()[0].blobs.size(), 2u);
  // A missing layer makes the image incomplete, not found.
  ::unlink(s.blob_path(layer).c_str());
  EXPECT_FALSE(s.lookup("r/x:latest"));
  s.put_blob("layer bytes");
  std::string orphan = s.put_blob("nobody needs me");
  EXPECT_GT(s.collect_garbage(), 0u);
  EXPECT_FALSE(s.has_blob(orphan));
  EXPECT_TRUE(s.has_blob(layer));
  EXPECT_EQ(s.untag({"r/x:latest"}), std::vector<std::string>{md});
  s.collect_garbage();
  EXPECT_FALSE(s.has_blob(layer) || s.has_blob(md) || s.has_blob(config));
  EXPECT_EQ(kind_of([&] { s.blob_path("sha256:../../etc/passwd"); }), ErrorKind::Image);
  {
    ImageStore::Ingest in(s, "sha256:" + std::string(64, 'b'));
    write_all(in.fd(), "x", 1);
    EXPECT_EQ(kind_of([&] { in.commit("sha256:" + std::string(64, 'c')); }), ErrorKind::Image);
  }
  EXPECT_TRUE(split(trim(run_capture({"ls", tmp_dir + "/images/oci/ingest"}).out), '\n').front().empty())
      << "a failed ingest leaves nothing";
}

}  // namespace
}  // namespace boxlite::registry
