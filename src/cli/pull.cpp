// boxlite pull [-q] IMAGE: pull an image into the home's image store.
#include <cstdio>

#include "commands.hpp"

namespace boxlite::cli {

void add_pull_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  struct Flags {
    std::string image;
    bool quiet = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("pull", "Pull an image from a registry");
  c->add_option("image", f->image, "Image reference (alpine, host:port/repo:tag, name@sha256:...)")->required();
  c->add_flag("-q,--quiet", f->quiet, "Print the digest only");
  c->callback([f, &g, &exit_code] {
    try {
      Runtime rt(runtime_options(g));
      PullResult r;
      {
        PullDisplay progress(rt, stdout, f->quiet);
        r = rt.pull_image(f->image);
      }
      if (f->quiet) {
        std::printf("%s\n", r.manifest_digest.c_str());
      } else {
        std::printf("Pulled: %s\nDigest: %s\nLayers: %zu\n", r.reference.c_str(), r.manifest_digest.c_str(), r.layers);
      }
      exit_code = 0;
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });
}

}  // namespace boxlite::cli
