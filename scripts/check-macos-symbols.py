#!/usr/bin/env python3
"""Checks, on Linux, that every `libc::` name the package uses on macOS exists in libc there.

No macOS standard library is needed: rustc's macro expansion (`-Zunpretty=expanded`, allowed on
a stable rustc by RUSTC_BOOTSTRAP=1) runs for any built-in target without one, and it removes
every `#[cfg]`-ed item and `cfg_if!` branch as that target would. For each target (by default
x86_64- and aarch64-apple-darwin):

1. the libc crate of Cargo.lock is expanded, and every `pub` name it defines is collected;
2. each unit this package compiles (the library, with and without `test` and `internals`; the
   binary; tests/, examples/, benches/ and the fuzz targets) is expanded, and every `libc::NAME`
   left in it is collected: the uses compiled on that target;
3. a name used but not defined is reported, and so is `std::os::linux`; the script then fails.

With no core library, other crates' macros (`assert_eq!`, `json!`, ...) cannot expand: each is
replaced by a stand-in that keeps the `libc::` paths in its arguments, and a unit whose expansion
still holds a macro call left unexpanded (rustc's `/*ERROR*/`) fails the check, so that no use
is lost unseen. What it cannot see: types (a name that exists with another type still passes),
whether a name defined in a private libc module is re-exported (it counts as defined), and the
fuzz crate's own Cargo.lock (its targets are checked against the package's libc). Code in a
macro's arguments is never cfg-stripped: it counts as used (over-reporting only). std APIs
other than `std::os::linux` are not checked.

    scripts/check-macos-symbols.py                 # exit 0 when every name is found
    scripts/check-macos-symbols.py --list          # also each name and the units using it
    scripts/check-macos-symbols.py --target T ...  # other targets (rustc --print target-list)
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

DEFAULT_TARGETS = ["x86_64-apple-darwin", "aarch64-apple-darwin"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A `pub` item of the expanded libc: functions (`extern` blocks too), constants, statics, types.
DEFINED = re.compile(
    r"\bpub\s+(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?(?:const|static|fn|type|struct|union|enum)\s+"
    r"(?:mut\s+)?([A-Za-z_][A-Za-z_0-9]*)"
)
# `pub use path::{a, b as c};` and `pub use path::name;`: the names they make public.
REEXPORT = re.compile(r"\bpub\s+use\s+([^;]*);")
USED = re.compile(r"\blibc::([A-Za-z_][A-Za-z_0-9]*)")
MACRO_CALL = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)!\s*[(\[{]")
# The crate of a macro called by path (`serde_json` of `serde_json::json!(...)`).
MACRO_PATH = re.compile(r"(?<![\w:$])([A-Za-z_][A-Za-z_0-9]*)::[A-Za-z_][A-Za-z_0-9]*!\s*[(\[{]")
MACRO_DEF = re.compile(r"macro_rules!\s*([A-Za-z_][A-Za-z_0-9]*)")
# The package's sources (fuzz/corpus and interop/ are data, target dirs are outside).
SOURCE_DIRS = ["src", "tests", "examples", "benches", "fuzz"]
# Macros called where an item goes: their stand-ins must expand to an item.
ITEM_MACROS = {"thread_local", "proptest", "fuzz_target", "prop_compose"}
# Words that look like a macro call in text (`if!(`) but cannot name one.
KEYWORDS = set(
    "as async await break const continue crate dyn else enum extern false fn for if impl in "
    "let loop match mod move mut pub ref return self Self static struct super trait true type "
    "unsafe use where while".split()
)
# Names every libc expansion defines: fewer means the expansion failed, not that they are gone.
ALWAYS_DEFINED = {"c_int", "read", "write", "fcntl", "pid_t"}

# Keeps the `libc::NAME` paths of any tokens, as statements; every stand-in calls it.
SCAN = r"""
#[macro_export]
macro_rules! __libc_scan {
    () => {};
    (libc :: $name:ident $($r:tt)*) => { let _ = libc::$name; $crate::__libc_scan!($($r)*); };
    (( $($i:tt)* ) $($r:tt)*) => { $crate::__libc_scan!($($i)*); $crate::__libc_scan!($($r)*); };
    ([ $($i:tt)* ] $($r:tt)*) => { $crate::__libc_scan!($($i)*); $crate::__libc_scan!($($r)*); };
    ({ $($i:tt)* } $($r:tt)*) => { $crate::__libc_scan!($($i)*); $crate::__libc_scan!($($r)*); };
    ($other:tt $($r:tt)*) => { $crate::__libc_scan!($($r)*); };
}
"""

RUSTC_BASE = [
    "rustc",
    "--edition",
    "2021",
    # No core library for the target: the crate is declared without one, so that expansion
    # goes on; the errors about what cannot be resolved are expected.
    "-Zcrate-attr=feature(no_core)",
    "-Zcrate-attr=no_core",
    '-Zcrate-attr=recursion_limit="100000"',
]


def rustc(args):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    return subprocess.run(RUSTC_BASE + args, env=env, capture_output=True, text=True, check=False)


def expand(source, target, cfgs, externs=()):
    """The expanded text of one crate root for `target` under `cfgs`, and rustc's stderr."""
    args = ["-Zunpretty=expanded", "--crate-type", "lib", "--crate-name", "unit"]
    args += ["--target", target]
    for cfg in cfgs:
        args += ["--cfg", cfg]
    for name, path in externs:
        args += ["--extern", f"{name}={path}"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "expanded.rs")
        run = rustc(args + [source, "-o", out])
        if not os.path.exists(out):
            sys.exit(f"rustc wrote no expansion of {source} for {target}:\n{run.stderr}")
        with open(out, encoding="utf-8") as f:
            return f.read(), run.stderr


class StandIns:
    """A crate of stand-ins for the macros of other crates, built for one target.

    Every macro the package calls, by name or by a crate's path (`serde_json::json!`), resolves
    to a stand-in that keeps the `libc::` paths of its arguments: the stand-in crate is in every
    unit's macro prelude, and is also passed as each crate that a macro path names.
    """

    def __init__(self, tmp, target, sources):
        called, crates = set(), set()
        for text in sources:
            called.update(MACRO_CALL.findall(text))
            crates.update(MACRO_PATH.findall(text))
        called -= {"macro_rules"} | KEYWORDS | set(MACRO_DEF.findall("\n".join(sources)))
        lines = [SCAN]
        for name in sorted(called):
            body = "$crate::__libc_scan!($($t)*);"
            out = f"const _: () = {{ {body} }};" if name in ITEM_MACROS else f"{{ {body} }}"
            lines.append(f"#[macro_export] macro_rules! {name} {{ ($($t:tt)*) => {{ {out} }} }}")
        source = os.path.join(tmp, "stand_ins.rs")
        with open(source, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        self.rmeta = os.path.join(tmp, "libstand_ins.rmeta")
        args = ["--crate-type", "rlib", "--emit=metadata", "--crate-name", "stand_ins"]
        run = rustc(args + ["--target", target, source, "-o", self.rmeta])
        if run.returncode != 0:
            sys.exit(f"the stand-in crate does not build:\n{run.stderr}")
        self.crates = sorted(crates - {"crate", "self", "super", "libc"})
        self.tmp = tmp

    def expand_unit(self, root, target, cfgs):
        """A unit of the package expanded with the stand-ins.

        The unit's root becomes a module of a wrapper crate (its inner `#![cfg]`, if any, then
        applies to the module).
        """
        wrapper = os.path.join(self.tmp, "wrapper.rs")
        with open(wrapper, "w", encoding="utf-8") as f:
            f.write("#[macro_use]\nextern crate stand_ins;\n")
            f.write(f"#[path = {json.dumps(os.path.join(ROOT, root))}]\nmod unit;\n")
        externs = [(name, self.rmeta) for name in ["stand_ins"] + self.crates]
        text, stderr = expand(wrapper, target, cfgs, externs)
        if "/*ERROR*/" in text:
            sys.exit(f"{root} for {target}: a macro call was left unexpanded:\n{stderr}")
        if "macro expansion ignores" in stderr:
            sys.exit(f"{root} for {target}: a stand-in expanded to the wrong kind "
                     f"(ITEM_MACROS?):\n{stderr}")
        return text


def libc_source():
    """The lib.rs and version of the libc crate that Cargo.lock resolves."""
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    libcs = [p for p in json.loads(meta.stdout)["packages"] if p["name"] == "libc"]
    if len(libcs) != 1:
        sys.exit(f"expected one libc in Cargo.lock, found {len(libcs)}")
    manifest = libcs[0]["manifest_path"]
    return os.path.join(os.path.dirname(manifest), "src", "lib.rs"), libcs[0]["version"]


def defined_names(text):
    names = set(DEFINED.findall(text))
    for body in REEXPORT.findall(text):
        for part in re.split(r"[{},]", body):
            name = part.strip().split(" as ")[-1].strip().split("::")[-1].strip()
            if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
                names.add(name)
    return names


def units():
    """(root file, cfg sets) of every unit compiled from this package."""
    found = [
        ("src/lib.rs", [[], ['feature="internals"'], ["test", 'feature="internals"']]),
        ("src/bin/mcpipe/main.rs", [[], ["test"]]),
    ]
    for pattern, cfgs in [
        ("tests/*.rs", [["test"]]),
        ("examples/*.rs", [[]]),
        ("benches/*.rs", [[]]),
        ("benches/*/main.rs", [[]]),
        ("fuzz/fuzz_targets/*.rs", [["fuzzing"]]),
    ]:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            found.append((os.path.relpath(path, ROOT), cfgs))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every name and its users")
    parser.add_argument("--target", action="append", help="a rustc target (repeatable)")
    options = parser.parse_args()
    os.chdir(ROOT)
    libc_root, version = libc_source()
    sources = []
    for top in SOURCE_DIRS:
        for path in glob.glob(os.path.join(top, "**", "*.rs"), recursive=True):
            if not path.startswith(os.path.join("fuzz", "corpus")):
                with open(path, encoding="utf-8") as f:
                    sources.append(f.read())
    targets = options.target or DEFAULT_TARGETS
    # Each target's expansions are independent of the others': one thread a CPU, each driving
    # its own rustc processes in its own temporary directory; the reports print in order.
    workers = max(1, min(len(targets), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        checks = [pool.submit(check, target, libc_root, version, sources, options.list)
                  for target in targets]
        reports = [c.result() for c in checks]
    failures = 0
    for lines, failed in reports:
        print("\n".join(lines))
        failures += failed
    return 1 if failures else 0


def check(target, libc_root, version, sources, list_all):
    """The report lines for one target, and how many failures they show."""
    defined = defined_names(expand(libc_root, target, [])[0])
    if not ALWAYS_DEFINED <= defined:
        sys.exit(f"the expansion of libc for {target} lacks {ALWAYS_DEFINED - defined}")
    used = {}
    linux_std = set()
    with tempfile.TemporaryDirectory() as tmp:
        stand_ins = StandIns(tmp, target, sources)
        for root, cfg_sets in units():
            for cfgs in cfg_sets:
                text = stand_ins.expand_unit(root, target, cfgs)
                for name in USED.findall(text):
                    used.setdefault(name, set()).add(root)
                if "std::os::linux" in text:
                    linux_std.add(root)
    missing = sorted(n for n in used if n not in defined)
    lines = [f"{target} (libc {version}): {len(used)} libc names used, {len(missing)} missing"]
    for name in sorted(used):
        if list_all or name in missing:
            mark = "MISSING" if name in missing else "ok"
            lines.append(f"  {mark:7} libc::{name:24} {', '.join(sorted(used[name]))}")
    for root in sorted(linux_std):
        lines.append(f"  std::os::linux in {root}")
    return lines, len(missing) + len(linux_std)

if __name__ == "__main__":
    sys.exit(main())
