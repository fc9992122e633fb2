//! The architecture test: reads every `.rs` file under `src/`, resolves each path that
//! names code of this crate (`use crate::…`, `crate::a::b` in expressions, `super::…`,
//! `self::…`, a child module's name, and `mooncake::…` in the binaries) to the file that
//! defines it, and fails on an import against the layer order or on an import cycle
//! between files.
//!
//! Layers, top to bottom (same-layer imports between different top-level modules are
//! allowed; `lib.rs` and `fuzzing.rs` are exempt):
//!
//! ```text
//! ffi, bin > store, conductor, p2p, pg > master, te > wire, metadata, config
//!          > codec, runtime, host > error, sys
//! ```
//!
//! A parent `mod.rs` declaring `mod child;` is not an import; a child naming `super::X`
//! where `X` is defined in the parent's own file is. Paths through `use` aliases and
//! re-exports are followed to the file that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules by layer, highest first.
const LAYERS: &[&[&str]] = &[
    &["ffi", "bin"],
    &["store", "conductor", "p2p", "pg"],
    &["master", "te"],
    &["wire", "metadata", "config"],
    &["codec", "runtime", "host"],
    &["error", "sys"],
];

/// Files that belong to no layer and close no cycle.
const EXEMPT: &[&str] = &["src/lib.rs", "src/fuzzing.rs"];

/// A token of Rust source with comments, strings and literals removed.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
}

/// Splits `src` into identifiers and punctuation with their 1-based line numbers.
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0usize, 1usize, Vec::new());
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' || ((ch == 'r' || ch == 'b') && raw_or_byte_string(&c, i)) {
            // Skip prefix letters, count hashes, then the body up to `"` + hashes.
            let mut raw = false;
            while c[i] != '"' && c[i] != '#' {
                raw |= c[i] == 'r';
                i += 1;
            }
            let mut hashes = 0;
            while c[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < c.len() {
                if c[i] == '\n' {
                    line += 1;
                }
                if !raw && c[i] == '\\' {
                    line += usize::from(at(i + 1) == '\n');
                    i += 2;
                    continue;
                }
                if c[i] == '"' && (0..hashes).all(|h| at(i + 1 + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1; // a lifetime: its name follows as an identifier
            }
        } else if ch == 'b' && at(i + 1) == '\'' {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// Whether `c[i..]` starts a raw string (`r"`, `r#"`), byte string (`b"`) or both (`br"`).
fn raw_or_byte_string(c: &[char], i: usize) -> bool {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return false;
    }
    let mut k = i;
    if c.get(k) == Some(&'b') {
        k += 1;
    }
    if c.get(k) == Some(&'r') {
        k += 1;
        while c.get(k) == Some(&'#') {
            k += 1;
        }
    }
    k > i && c.get(k) == Some(&'"')
}

/// A module: which crate it is in, its path from that crate's root, the file holding it.
type ModKey = (String, Vec<String>);

/// One path found in a file, before resolution.
#[derive(Debug, Clone)]
struct RawPath {
    module: ModKey,
    segments: Vec<String>,
    line: usize,
    is_use: bool,
    alias: Option<String>,
}

/// Everything read from the sources.
#[derive(Default)]
struct Tree {
    /// Module -> the file that holds its items.
    modules: BTreeMap<ModKey, String>,
    /// Module -> the names of its child modules.
    children: BTreeMap<ModKey, BTreeSet<String>>,
    /// Module -> names brought in by `use` (alias -> absolute path, with its crate).
    aliases: BTreeMap<ModKey, BTreeMap<String, ModKey>>,
    /// Every path found.
    paths: Vec<(String, RawPath)>,
}

/// One resolved import: who imports, at which line, which path, which file it names.
#[derive(Debug, Clone, PartialEq)]
struct Import {
    from: String,
    line: usize,
    path: String,
    to: String,
}

/// What the test reports.
#[derive(Debug, Default)]
struct Report {
    files: usize,
    upward: Vec<Import>,
    cycles: Vec<Vec<Import>>,
}

/// Reads a file's module declarations and paths into `tree`, recursing into the files
/// its `mod name;` declarations name.
fn read_module(files: &BTreeMap<String, String>, tree: &mut Tree, file: &str, key: ModKey) {
    let Some(src) = files.get(file) else { return };
    let toks = tokenize(src);
    let dir = Path::new(file)
        .parent()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let stem = Path::new(file)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let owns_dir = key.1.is_empty() || stem == "mod";
    let child_dir = if owns_dir {
        dir.clone()
    } else {
        format!("{dir}/{stem}")
    };
    tree.modules.insert(key.clone(), file.to_string());
    // Stack of (module, brace depth at which its inline block opened).
    let mut stack: Vec<(ModKey, usize)> = vec![(key.clone(), 0)];
    let (mut depth, mut i, mut path_attr) = (0usize, 0usize, None::<String>);
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |k: usize, p: char| matches!(toks.get(k), Some((Tok::Punct(q), _)) if *q == p);
    let path_attrs = path_attributes(src);
    while i < toks.len() {
        let cur = stack.last().unwrap().0.clone();
        let line = toks[i].1;
        if punct(i, '{') {
            depth += 1;
        } else if punct(i, '}') {
            depth = depth.saturating_sub(1);
            if stack.len() > 1 && stack.last().unwrap().1 == depth {
                stack.pop();
            }
        } else if ident(i) == Some("path") && punct(i + 1, '=') && i > 0 && punct(i - 1, '[') {
            path_attr = path_attrs.get(&line).cloned();
        } else if ident(i) == Some("mod") && ident(i + 1).is_some() {
            let name = ident(i + 1).unwrap().to_string();
            let mut child = cur.clone();
            child.1.push(name.clone());
            tree.children
                .entry(cur.clone())
                .or_default()
                .insert(name.clone());
            if punct(i + 2, ';') && stack.len() == 1 {
                let target = match path_attr.take() {
                    Some(p) => format!("{dir}/{p}"),
                    None if files.contains_key(&format!("{child_dir}/{name}.rs")) => {
                        format!("{child_dir}/{name}.rs")
                    }
                    None => format!("{child_dir}/{name}/mod.rs"),
                };
                read_module(files, tree, &target, child);
                i += 3;
                continue;
            } else if punct(i + 2, '{') {
                tree.modules.insert(child.clone(), file.to_string());
                stack.push((child, depth));
                depth += 1;
                i += 3;
                continue;
            }
        } else if ident(i) == Some("pub") && punct(i + 1, '(') {
            // A visibility such as `pub(super)` or `pub(in crate::x)` names no import.
            while i < toks.len() && !punct(i, ')') {
                i += 1;
            }
        } else if ident(i) == Some("use") {
            let mut k = i + 1;
            let mut found = Vec::new();
            parse_use_tree(&toks, &mut k, Vec::new(), &mut found);
            for (segments, alias, line) in found {
                tree.paths.push((
                    file.to_string(),
                    RawPath {
                        module: cur.clone(),
                        segments,
                        line,
                        is_use: true,
                        alias,
                    },
                ));
            }
            i = k;
            continue;
        } else if let Some(first) = ident(i) {
            let starts_path = punct(i + 1, ':') && punct(i + 2, ':');
            let continues = i >= 2 && punct(i - 1, ':') && punct(i - 2, ':');
            if starts_path && !continues && first != "Self" {
                let mut segments = vec![first.to_string()];
                let mut k = i + 1;
                while punct(k, ':') && punct(k + 1, ':') && ident(k + 2).is_some() {
                    segments.push(ident(k + 2).unwrap().to_string());
                    k += 3;
                }
                tree.paths.push((
                    file.to_string(),
                    RawPath {
                        module: cur.clone(),
                        segments,
                        line,
                        is_use: false,
                        alias: None,
                    },
                ));
                i = k;
                continue;
            }
        }
        i += 1;
    }
}

/// The value of each `#[path = "..."]` attribute in `src`, by line.
fn path_attributes(src: &str) -> BTreeMap<usize, String> {
    let mut out = BTreeMap::new();
    for (n, text) in src.lines().enumerate() {
        let t = text.trim();
        if let Some(rest) = t.strip_prefix("#[path = \"") {
            if let Some(end) = rest.find('"') {
                out.insert(n + 1, rest[..end].to_string());
            }
        }
    }
    out
}

/// Parses one use tree at `toks[*k]` (after `use`), pushing each leaf path.
fn parse_use_tree(
    toks: &[(Tok, usize)],
    k: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) {
    let mut path = prefix;
    let line = toks.get(*k).map_or(0, |t| t.1);
    loop {
        match toks.get(*k) {
            Some((Tok::Punct(':'), _)) => *k += 1,
            Some((Tok::Ident(s), _)) if s == "as" => {
                *k += 1;
                let alias = match toks.get(*k) {
                    Some((Tok::Ident(a), _)) => Some(a.clone()),
                    _ => None,
                };
                *k += 1;
                out.push((path, alias, line));
                return;
            }
            Some((Tok::Ident(s), _)) => {
                path.push(s.clone());
                *k += 1;
            }
            Some((Tok::Punct('*'), _)) => {
                *k += 1;
                out.push((path, Some("*".into()), line));
                return;
            }
            Some((Tok::Punct('{'), _)) => {
                *k += 1;
                loop {
                    match toks.get(*k) {
                        Some((Tok::Punct('}'), _)) => {
                            *k += 1;
                            break;
                        }
                        Some((Tok::Punct(','), _)) => *k += 1,
                        None => return,
                        _ => parse_use_tree(toks, k, path.clone(), out),
                    }
                }
                if matches!(toks.get(*k), Some((Tok::Punct(';'), _))) {
                    *k += 1;
                }
                return;
            }
            Some((Tok::Punct(';'), _)) => {
                *k += 1;
                out.push((path, None, line));
                return;
            }
            _ => {
                out.push((path, None, line));
                return;
            }
        }
    }
}

/// Makes `segments` (as written in module `at`) absolute in its crate; `None` for a path
/// into another crate (std, a dependency) or one that names nothing known.
fn absolutize(tree: &Tree, at: &ModKey, segments: &[String], is_use: bool) -> Option<ModKey> {
    let (krate, here) = at;
    let first = segments.first()?.as_str();
    let mut krate = krate.clone();
    let mut base: Vec<String>;
    let rest: &[String];
    match first {
        "crate" => {
            base = Vec::new();
            rest = &segments[1..];
        }
        "mooncake" if krate != "lib" => return Some(("lib".into(), segments[1..].to_vec())),
        "self" => {
            base = here.clone();
            rest = &segments[1..];
        }
        "super" => {
            base = here.clone();
            let mut n = 0;
            while segments.get(n).map(String::as_str) == Some("super") {
                base.pop()?;
                n += 1;
            }
            rest = &segments[n..];
        }
        _ => {
            let known_child = tree.children.get(at).is_some_and(|c| c.contains(first));
            let alias = tree.aliases.get(at).and_then(|a| a.get(first)).cloned();
            if known_child {
                base = here.clone();
                rest = segments;
            } else if let (Some((target_crate, target)), false) = (alias, is_use) {
                krate = target_crate;
                base = target;
                rest = &segments[1..];
            } else {
                return None;
            }
        }
    }
    base.extend(rest.iter().cloned());
    Some((krate, base))
}

/// The file that defines what `path` names, following `use` aliases (re-exports).
fn resolve(tree: &Tree, path: &ModKey, hops: usize) -> Option<String> {
    let (krate, segs) = path;
    let mut n = segs.len();
    while n > 0
        && !tree
            .modules
            .contains_key(&(krate.clone(), segs[..n].to_vec()))
    {
        n -= 1;
    }
    let module = (krate.clone(), segs[..n].to_vec());
    if n < segs.len() && hops < 8 {
        if let Some((to_crate, target)) = tree.aliases.get(&module).and_then(|a| a.get(&segs[n])) {
            let mut next = target.clone();
            next.extend(segs[n + 1..].iter().cloned());
            return resolve(tree, &(to_crate.clone(), next), hops + 1);
        }
    }
    tree.modules.get(&module).cloned()
}

/// The layer of a file (0 = top), or `None` for an exempt file.
fn layer(file: &str) -> Option<(usize, String)> {
    if EXEMPT.contains(&file) {
        return None;
    }
    let top = file.strip_prefix("src/")?.split('/').next()?;
    let top = top.strip_suffix(".rs").unwrap_or(top).to_string();
    LAYERS
        .iter()
        .position(|l| l.contains(&top.as_str()))
        .map(|n| (n, top))
}

/// Reads the crate in `files` (paths relative to the repository, all under `src/`) and
/// reports its upward imports and its import cycles.
fn analyze(files: &BTreeMap<String, String>) -> Report {
    let mut tree = Tree::default();
    let mut roots = vec![("src/lib.rs".to_string(), "lib".to_string())];
    for f in files.keys() {
        let Some(rest) = f.strip_prefix("src/bin/") else {
            continue;
        };
        if !rest.contains('/') {
            roots.push((f.clone(), format!("bin:{rest}")));
        } else if let Some(dir) = rest.strip_suffix("/main.rs") {
            roots.push((f.clone(), format!("bin:{dir}")));
        }
    }
    for (file, krate) in roots {
        read_module(files, &mut tree, &file, (krate, Vec::new()));
    }
    let paths = std::mem::take(&mut tree.paths);
    for (_, p) in paths.iter().filter(|(_, p)| p.is_use) {
        let Some(name) = p.alias.clone().or_else(|| p.segments.last().cloned()) else {
            continue;
        };
        if name == "*" || name == "self" && p.segments.len() < 2 {
            continue;
        }
        let mut segs = p.segments.clone();
        let name = if name == "self" {
            segs.pop();
            segs.last().cloned().unwrap()
        } else {
            name
        };
        if let Some(abs) = absolutize(&tree, &p.module, &segs, true) {
            tree.aliases
                .entry(p.module.clone())
                .or_default()
                .insert(name, abs);
        }
    }
    let mut imports = Vec::new();
    for (file, p) in &paths {
        let mut segs = p.segments.clone();
        if segs.last().map(String::as_str) == Some("self") {
            segs.pop();
        }
        let Some(abs) = absolutize(&tree, &p.module, &segs, p.is_use) else {
            continue;
        };
        let Some(to) = resolve(&tree, &abs, 0) else {
            continue;
        };
        if &to != file {
            let path = p.segments.join("::");
            imports.push(Import {
                from: file.clone(),
                line: p.line,
                path,
                to,
            });
        }
    }
    let mut report = Report {
        files: tree.modules.values().collect::<BTreeSet<_>>().len(),
        ..Report::default()
    };
    for imp in &imports {
        if let (Some((from, a)), Some((to, b))) = (layer(&imp.from), layer(&imp.to)) {
            if to < from && a != b {
                report.upward.push(imp.clone());
            }
        }
    }
    // The exempt files reach into every module by design; they close no cycle.
    imports.retain(|i| !EXEMPT.contains(&i.from.as_str()) && !EXEMPT.contains(&i.to.as_str()));
    report.cycles = cycles(&imports);
    report
}

/// The import edges inside each strongly connected group of two or more files.
fn cycles(imports: &[Import]) -> Vec<Vec<Import>> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for imp in imports {
        graph.entry(&imp.from).or_default().insert(&imp.to);
        graph.entry(&imp.to).or_default();
    }
    // Two files are in one group when each reaches the other.
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(f) = todo.pop() {
            for &n in &graph[f.as_str()] {
                if seen.insert(n.to_string()) {
                    todo.push(n.to_string());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<String>> = graph.keys().map(|&f| (f, reach(f))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for (&f, r) in &reaches {
        if !r.contains(f) || groups.iter().any(|g| g.contains(f)) {
            continue;
        }
        let group: BTreeSet<String> = r
            .iter()
            .filter(|o| reaches[o.as_str()].contains(f))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
        .iter()
        .map(|g| {
            let mut edges: Vec<Import> = imports
                .iter()
                .filter(|i| g.contains(&i.from) && g.contains(&i.to))
                .cloned()
                .collect();
            edges.sort_by(|a, b| (&a.from, a.line).cmp(&(&b.from, b.line)));
            edges
        })
        .collect()
}

/// Every `.rs` file under `dir`, keyed by its path relative to the repository.
fn read_sources(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The report on this repository's `src/`, and how many `.rs` files it holds.
fn report_on_this_tree() -> (Report, usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = BTreeMap::new();
    read_sources(root, &root.join("src"), &mut files);
    (analyze(&files), files.len())
}

#[test]
fn every_source_file_is_reached_from_a_crate_root() {
    let (report, on_disk) = report_on_this_tree();
    assert_eq!(
        report.files, on_disk,
        "a file under src/ is not reached by a `mod`"
    );
}

#[test]
fn imports_point_downward() {
    let (report, _) = report_on_this_tree();
    for i in &report.upward {
        println!("upward: {}:{} `{}` names {}", i.from, i.line, i.path, i.to);
    }
    assert!(
        report.upward.is_empty(),
        "{} import(s) against the layer order (listed above)",
        report.upward.len()
    );
}

#[test]
fn files_do_not_import_each_other() {
    let (report, _) = report_on_this_tree();
    for (n, cycle) in report.cycles.iter().enumerate() {
        println!("cycle {}:", n + 1);
        // One line per importing file and imported file: the first place, and how many more.
        let mut pairs: BTreeMap<(&str, &str), Vec<&Import>> = BTreeMap::new();
        for i in cycle {
            pairs.entry((&i.from, &i.to)).or_default().push(i);
        }
        for ((from, to), all) in pairs {
            let (first, more) = (all[0], all.len() - 1);
            let more = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            println!(
                "    {from}:{} `{}` names {to}{more}",
                first.line, first.path
            );
        }
    }
    assert!(
        report.cycles.is_empty(),
        "{} import cycle(s) between files (listed above)",
        report.cycles.len()
    );
}

#[cfg(test)]
mod resolver {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Report {
        analyze(
            &files
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        )
    }

    fn edges(r: &Report) -> Vec<String> {
        r.upward
            .iter()
            .map(|i| format!("{}:{}>{}", i.from, i.line, i.to))
            .collect()
    }

    #[test]
    fn downward_and_same_layer_imports_pass() {
        let r = tree(&[
            (
                "src/lib.rs",
                "pub mod te;\npub mod store;\npub mod master;\npub mod error;",
            ),
            (
                "src/te/mod.rs",
                "use crate::error::Error;\npub struct Engine;",
            ),
            ("src/master/mod.rs", "use crate::te::Engine;"),
            (
                "src/store/mod.rs",
                "fn f() { crate::master::run(); crate::te::Engine; }",
            ),
            ("src/error.rs", "pub struct Error;"),
        ]);
        assert_eq!(r.files, 5);
        assert!(r.upward.is_empty(), "{:?}", r.upward);
        assert!(r.cycles.is_empty());
    }

    #[test]
    fn upward_imports_are_found_in_uses_and_expressions() {
        let r = tree(&[
            ("src/lib.rs", "pub mod te;\npub mod store;\npub mod error;"),
            ("src/te/mod.rs", "pub mod engine;"),
            ("src/te/engine.rs", "use crate::{error::E, store::{ops::Put, Api}};\n\nfn f() {\n crate::store::ops::put();\n}"),
            ("src/store/mod.rs", "pub mod ops;\npub trait Api {}"),
            ("src/store/ops.rs", "pub struct Put;"),
            ("src/error.rs", "// crate::store::Api in a comment\nconst S: &str = \"crate::store::Api\";"),
        ]);
        assert_eq!(
            edges(&r),
            [
                "src/te/engine.rs:1>src/store/ops.rs",
                "src/te/engine.rs:1>src/store/mod.rs",
                "src/te/engine.rs:4>src/store/ops.rs"
            ]
        );
    }

    #[test]
    fn binaries_import_the_library_through_its_name() {
        let r = tree(&[
            ("src/lib.rs", "pub mod ffi;\npub mod store;"),
            ("src/ffi/mod.rs", "pub fn f() {}"),
            ("src/store/mod.rs", "pub fn g() {}"),
            ("src/bin/tool/main.rs", "mod sub;\nuse mooncake::store::g;"),
            (
                "src/bin/tool/sub.rs",
                "use crate::helper;\nuse mooncake::ffi::f;",
            ),
            (
                "src/bin/one.rs",
                "#[path = \"one/part.rs\"]\nmod part;\nuse part::X;",
            ),
            ("src/bin/one/part.rs", "pub struct X;"),
        ]);
        assert_eq!(r.files, 7);
        assert!(r.upward.is_empty(), "{:?}", r.upward);
        assert!(r.cycles.is_empty());
    }

    #[test]
    fn a_child_naming_its_parents_item_while_the_parent_imports_it_is_a_cycle() {
        let r = tree(&[
            ("src/lib.rs", "pub mod te;"),
            (
                "src/te/mod.rs",
                "mod a;\nmod b;\npub use a::A;\npub struct Shared;",
            ),
            ("src/te/a.rs", "use super::Shared;\npub struct A;"),
            (
                "src/te/b.rs",
                "use super::A;\nfn f() { super::super::te::a::A; }",
            ),
        ]);
        let cycle: Vec<String> = r
            .cycles
            .iter()
            .flatten()
            .map(|i| format!("{}:{}>{}", i.from, i.line, i.to))
            .collect();
        // b.rs names `super::A`, a re-export: it resolves to a.rs and forms no cycle.
        assert_eq!(
            cycle,
            ["src/te/a.rs:1>src/te/mod.rs", "src/te/mod.rs:3>src/te/a.rs"]
        );
    }

    #[test]
    fn a_parent_declaring_its_child_and_inline_tests_are_not_imports() {
        let r = tree(&[
            ("src/lib.rs", "pub mod te;"),
            (
                "src/te/mod.rs",
                "mod a;\npub struct Shared;\n#[cfg(test)]\nmod tests {\n use super::*;\n}",
            ),
            (
                "src/te/a.rs",
                "use super::Shared;\npub(super) fn f<'a>(x: &'a str) -> char { 'x' }",
            ),
        ]);
        assert!(r.cycles.is_empty(), "{:?}", r.cycles);
    }

    #[test]
    fn cycles_through_three_files_are_found() {
        let r = tree(&[
            ("src/lib.rs", "pub mod wire;"),
            ("src/wire/mod.rs", "pub mod a;\npub mod b;\npub mod c;"),
            ("src/wire/a.rs", "use crate::wire::b::B;\npub struct A;"),
            ("src/wire/b.rs", "use super::c::C as Cee;\npub struct B;"),
            (
                "src/wire/c.rs",
                "pub struct C;\nfn f() { crate::wire::a::A; }",
            ),
        ]);
        assert_eq!(r.cycles.len(), 1);
        assert_eq!(r.cycles[0].len(), 3);
        assert!(r.upward.is_empty());
    }
}
