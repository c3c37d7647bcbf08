// boxlite images [-a] [-q] [--format table|json|yaml], boxlite rmi IMAGE...,
// boxlite image prune [-a].
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {

namespace {

struct Row {
  std::string repository, tag, id, created, size;
  int64_t created_ms = 0;
  uint64_t bytes = 0;
  std::string digest;
};

std::string human_size(uint64_t b) {
  char buf[32];
  if (b < 1000) {
    std::snprintf(buf, sizeof buf, "%lluB", static_cast<unsigned long long>(b));
  } else if (b < 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1fkB", static_cast<double>(b) / 1e3);
  } else if (b < 1000ull * 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1fMB", static_cast<double>(b) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fGB", static_cast<double>(b) / 1e9);
  }
  return buf;
}

std::string ago(int64_t ms) {
  int64_t s = std::max<int64_t>(0, static_cast<int64_t>(std::time(nullptr)) - ms / 1000);
  if (s < 60) return std::to_string(s) + " seconds ago";
  if (s < 3600) return std::to_string(s / 60) + " minutes ago";
  if (s < 86400) return std::to_string(s / 3600) + " hours ago";
  return std::to_string(s / 86400) + " days ago";
}

Row row_of(const ImageInfo& i) {
  Row r;
  try {
    auto ref = parse_image_reference(i.reference);
    r.repository = ref.registry + "/" + ref.repository;
    r.tag = ref.digest.empty() ? ref.tag : "<none>";
  } catch (const Error&) {
    r.repository = i.reference;
    r.tag = "<none>";
  }
  r.digest = i.manifest_digest;
  r.id = i.manifest_digest.substr(7, 12);
  r.created_ms = i.created_ms;
  r.created = ago(i.created_ms);
  r.bytes = i.size;
  r.size = human_size(i.size);
  return r;
}

void print_table(const std::vector<Row>& rows) {
  size_t wr = 10, wt = 3;
  for (const auto& r : rows) {
    wr = std::max(wr, r.repository.size());
    wt = std::max(wt, r.tag.size());
  }
  int a = static_cast<int>(wr), b = static_cast<int>(wt);
  std::printf("%-*s   %-*s   %-12s   %-16s   %s\n", a, "REPOSITORY", b, "TAG", "IMAGE ID", "CREATED", "SIZE");
  for (const auto& r : rows) {
    std::printf("%-*s   %-*s   %-12s   %-16s   %s\n", a, r.repository.c_str(), b, r.tag.c_str(), r.id.c_str(),
                r.created.c_str(), r.size.c_str());
  }
}

nlohmann::json json_of(const Row& r) {
  return {
      {"Repository", r.repository}, {"Tag", r.tag}, {"ID", r.digest}, {"CreatedAtMs", r.created_ms}, {"Size", r.bytes}};
}

}  // namespace

void add_image_commands(CLI::App& app, GlobalFlags& g, int& exit_code) {
  struct Flags {
    bool all = false, quiet = false;
    std::string format = "table";
    std::vector<std::string> images;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* ls = app.add_subcommand("images", "List local images");
  ls->add_flag("-a,--all", f->all, "Show all images (boxlite keeps no intermediate images, so this lists the same)");
  ls->add_flag("-q,--quiet", f->quiet, "Print image IDs only");
  ls->add_option("--format", f->format, "table, json or yaml")->check(CLI::IsMember({"table", "json", "yaml"}));
  ls->callback([f, &g, &exit_code] {
    try {
      Runtime rt(runtime_options(g));
      std::vector<Row> rows;
      for (const auto& i : rt.list_images()) rows.push_back(row_of(i));
      if (f->quiet) {
        std::set<std::string> seen;
        for (const auto& r : rows) {
          if (seen.insert(r.id).second) std::printf("%s\n", r.id.c_str());
        }
      } else if (f->format == "json") {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : rows) arr.push_back(json_of(r));
        std::printf("%s\n", arr.dump(2).c_str());
      } else if (f->format == "yaml") {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : rows) arr.push_back(json_of(r));
        print_yaml(arr, std::cout);  // as `ls --format yaml`: `[]` when there are none
      } else {
        print_table(rows);
      }
      exit_code = 0;
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });

  auto remove = [f, &g, &exit_code] {
    exit_code = 0;
    Runtime rt(runtime_options(g));
    for (const auto& name : f->images) {
      try {
        for (const auto& r : rt.remove_image(name)) std::printf("Untagged: %s\n", r.c_str());
      } catch (const Error& e) {
        exit_code = report_error(e);
      }
    }
  };
  CLI::App* rmi = app.add_subcommand("rmi", "Remove images (never one a box uses)");
  rmi->add_option("image", f->images, "Image references or IDs")->required();
  rmi->callback(remove);

  CLI::App* image = app.add_subcommand("image", "Manage images");
  image->require_subcommand(1);
  CLI::App* rm = image->add_subcommand("rm", "Remove images (never one a box uses)");
  rm->add_option("image", f->images, "Image references or IDs")->required();
  rm->callback(remove);
  CLI::App* prune = image->add_subcommand("prune", "Remove unused blobs and caches; with -a every image no box uses");
  prune->add_flag("-a,--all", f->all, "Also remove every image no box uses");
  prune->callback([f, &g, &exit_code] {
    try {
      Runtime rt(runtime_options(g));
      uint64_t freed = rt.prune_images(f->all);
      std::printf("Total reclaimed space: %s\n", human_size(freed).c_str());
      exit_code = 0;
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });
}

}  // namespace boxlite::cli
