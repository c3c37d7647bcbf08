"""scripts/check-deps against small trees made here: what it reads and what it reports."""
import os
import subprocess
import sys
import textwrap

import pytest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check-deps")


def readme(name, depends, must_not="depend on nothing in particular", owns="its files"):
    return f"# {name}\nWhat it is.\n\n- **Owns:** {owns}.\n- **Depends on:** {depends}.\n- **Must not:** {must_not}.\n"


def write(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(textwrap.dedent(text))


def check(root):
    r = subprocess.run([sys.executable, CHECK, str(root)], capture_output=True, text=True)
    return r.returncode, r.stderr


@pytest.fixture
def tree(tmp_path):
    """common <- engine <- engine/jail, shim -> engine/jail; a public header; a proto."""
    write(tmp_path, {
        "src/common/README.md": readme("common", "nothing of ours", "depend on `shim`"),
        "src/common/io.hpp": "#pragma once\n#include <string>\n#include \"generated.inc\"\n",
        "src/proto/README.md": readme("proto", "`common`"),
        "src/proto/wire.proto": "syntax = \"proto3\";\n",
        "src/proto/codec.cpp": '#include "wire.pb.h"\n#include "common/io.hpp"\n',
        "src/engine/README.md": readme("engine", "`common`, `include/pub`"),
        "src/engine/spec.hpp": '#include "common/io.hpp"\n#include "pub/kind.hpp"\n',
        "src/engine/jail/README.md": readme("engine/jail", "`engine`", "depend on `shim`"),
        "src/engine/jail/jail.hpp": '#include "engine/spec.hpp"\n#include "../spec.hpp"\n',
        "src/engine/CMakeLists.txt": """
            add_library(boxlite_engine STATIC spec.cpp jail/jail.cpp)  # a comment (with parens)
            target_link_libraries(boxlite_engine PUBLIC boxlite_common
              nlohmann_json::nlohmann_json)
            add_library(boxlite_jail_init STATIC jail/init.cpp)
            target_link_libraries(boxlite_jail_init PUBLIC boxlite_engine)
        """,
        "src/shim/README.md": readme("shim", "`engine/jail`, `proto`", "depend on `common` directly"),
        "src/shim/shim.cpp": '#include "engine/jail/jail.hpp"\n#include "wire.pb.h"\n#include "shim.hpp"\n',
        "src/shim/shim.hpp": "#pragma once\n",
        "include/pub/kind.hpp": "#pragma once\n",
    })
    return tmp_path


def test_a_tree_whose_readmes_match_passes(tree):
    code, err = check(tree)
    assert (code, err) == (0, "")


def test_an_undeclared_include_names_the_readme_the_dependency_and_the_file(tree):
    write(tree, {"src/proto/more.cpp": '#include "engine/jail/jail.hpp"\n'})
    code, err = check(tree)
    assert code == 1
    assert ("src/proto/README.md: 'Depends on' does not name `engine/jail`, but src/proto/more.cpp includes "
            '"engine/jail/jail.hpp"') in err


def test_an_undeclared_link_names_the_cmake_file_and_the_targets(tree):
    write(tree, {"src/shim/CMakeLists.txt": "add_library(boxlite_shim STATIC shim.cpp)\n"
                                            "target_link_libraries(boxlite_shim PRIVATE boxlite_engine)\n"})
    code, err = check(tree)
    assert code == 1
    assert ("src/shim/README.md: 'Depends on' does not name `engine`, but src/shim/CMakeLists.txt links "
            "boxlite_shim to boxlite_engine") in err


def test_a_target_is_the_component_its_name_says_not_the_directory_that_defines_it(tree):
    # boxlite_jail_init is defined in src/engine and links boxlite_engine: engine/jail's use.
    write(tree, {"src/engine/jail/jail.hpp": "#pragma once\n",
                 "src/engine/jail/README.md": readme("engine/jail", "`common`")})
    code, err = check(tree)
    assert code == 1
    assert ("src/engine/jail/README.md: 'Depends on' does not name `engine`, but src/engine/CMakeLists.txt links "
            "boxlite_jail_init to boxlite_engine") in err
    assert "'Depends on' names `common`, but nothing in src/engine/jail" in err
    assert "src/engine/README.md" not in err


def test_the_longest_name_wins(tree):
    # boxlite_engine_jail is engine/jail's, not engine's, wherever it is defined.
    write(tree, {"src/engine/jail/CMakeLists.txt": "add_library(boxlite_engine_jail STATIC jail.cpp)\n"
                                                   "target_link_libraries(boxlite_engine_jail PUBLIC boxlite_common)\n"})
    code, err = check(tree)
    assert code == 1
    assert ("src/engine/jail/README.md: 'Depends on' does not name `common`, but src/engine/jail/CMakeLists.txt "
            "links boxlite_engine_jail to boxlite_common") in err


def test_a_declared_dependency_that_nothing_uses_fails(tree):
    write(tree, {"src/proto/README.md": readme("proto", "`common`, `engine`")})
    code, err = check(tree)
    assert code == 1
    assert "src/proto/README.md: 'Depends on' names `engine`, but nothing in src/proto includes it" in err


def test_must_not_is_checked_where_it_names_a_component(tree):
    write(tree, {"src/shim/extra.cpp": '#include "common/io.hpp"\n',
                 "src/shim/README.md": readme("shim", "`engine/jail`, `proto`, `common`", "depend on `common`")})
    code, err = check(tree)
    assert code == 1
    assert "src/shim/README.md: `common` is both in 'Depends on' and in 'Must not'" in err
    assert "src/shim/README.md: 'Must not' forbids `common`, but src/shim/extra.cpp includes \"common/io.hpp\"" in err


def test_a_sub_components_files_are_not_its_parents(tree):
    # engine/jail includes engine (its parent): that is not engine using itself, and
    # engine does not inherit engine/jail's uses.
    write(tree, {"src/engine/jail/more.cpp": '#include "proto/codec.hpp"\n'})
    code, err = check(tree)
    assert "src/engine/jail/README.md: 'Depends on' does not name `proto`" in err
    assert "src/engine/README.md" not in err


def test_public_headers_are_a_dependency_of_their_own_unless_a_component_owns_them(tree):
    write(tree, {"src/engine/README.md": readme("engine", "`common`")})
    code, err = check(tree)
    assert "'Depends on' does not name `include/pub`, but src/engine/spec.hpp includes \"pub/kind.hpp\"" in err
    write(tree, {"src/common/README.md": readme("common", "nothing of ours", "depend on `shim`", "`include/pub`")})
    code, err = check(tree)
    assert "src/engine/README.md: 'Depends on' names `include/pub`" not in err
    assert (code, err) == (0, "")


def test_a_readme_without_the_three_bullets_fails(tree):
    write(tree, {"src/proto/README.md": "# proto\nDepends on `common`.\n"})
    code, err = check(tree)
    assert code == 1
    for bullet in ("Owns", "Depends on", "Must not"):
        assert f"src/proto/README.md: no '- **{bullet}:**' bullet" in err


def test_a_name_in_depends_on_that_is_no_component_fails(tree):
    write(tree, {"src/proto/README.md": readme("proto", "`comon`")})
    code, err = check(tree)
    assert "src/proto/README.md: 'Depends on' names `comon`, which is not a component" in err


def test_a_bullet_may_go_on_over_indented_lines(tree):
    write(tree, {"src/engine/README.md": "# engine\n- **Owns:** a lot,\n  and more.\n- **Depends on:** "
                                         "`common`,\n  `include/pub`.\n- **Must not:** anything.\n"})
    assert check(tree) == (0, "")


def test_the_real_tree_passes():
    root = os.path.join(os.path.dirname(CHECK), "..")
    assert check(root) == (0, "")
