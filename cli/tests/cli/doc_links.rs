//! Every relative link of the documentation leads somewhere: the file it names exists, and
//! a `#section` it names is a heading of that file, as GitHub makes a heading's anchor. A
//! renamed heading or a moved page fails here rather than leaving readers at a dead link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root, above this package (`cli/`).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ is in the repository")
}

/// The Markdown files readers are sent to: the repository's top level and each top-level
/// folder's own (`docs/`, a crate's README); build outputs left out.
fn documents() -> Vec<PathBuf> {
    let md = |dir: &Path| -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut found: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md")).collect();
        found.sort();
        found
    };
    let mut folders: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.') && !matches!(n.to_str(), Some("target" | "device-bin"))))
        .collect();
    folders.sort();
    let mut docs = md(root());
    for folder in folders {
        docs.extend(md(&folder));
    }
    docs
}

/// The anchor GitHub gives a heading: lower case, characters other than letters, digits,
/// spaces, hyphens and underscores dropped, spaces made hyphens.
fn anchor(heading: &str) -> String {
    heading.trim().to_lowercase().chars().filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_')).map(|c| if c == ' ' { '-' } else { c }).collect()
}

/// The lines of a Markdown text outside its fenced code blocks.
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter(move |(_, l)| {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors of a Markdown text's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    prose(text).filter_map(|(_, l)| l.strip_prefix('#')).map(|h| anchor(h.trim_start_matches('#'))).collect()
}

/// The targets of the inline links `[text](target)` of a line.
fn links(line: &str) -> Vec<&str> {
    line.match_indices("](").filter_map(|(at, _)| line[at + 2..].split([')', ' ']).next()).filter(|t| !t.is_empty()).collect()
}

#[test]
fn every_relative_link_in_the_docs_leads_to_a_file_and_section() {
    let docs = documents();
    assert!(docs.len() >= 8, "documents found: {docs:?}");
    let mut dead = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (line, l) in prose(&text) {
            for target in links(l) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, section) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() { doc.clone() } else { doc.parent().unwrap().join(path) };
                let at = format!("{}:{}: {target}", doc.strip_prefix(root()).unwrap().display(), line + 1);
                if !file.exists() {
                    dead.push(format!("{at} (no such file)"));
                } else if !section.is_empty() && file.extension().is_some_and(|x| x == "md") && !anchors(&std::fs::read_to_string(&file).unwrap()).contains(section) {
                    dead.push(format!("{at} (no such section)"));
                }
            }
        }
    }
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(anchor(" Large panoramas: strips, pyramidal OME-TIFF and OME-Zarr"), "large-panoramas-strips-pyramidal-ome-tiff-and-ome-zarr");
    assert_eq!(anchor("Threads: a window of pairs at once"), "threads-a-window-of-pairs-at-once");
    assert_eq!(links("see [a](b.md#c) and [d](https://e) then (f)"), ["b.md#c", "https://e"]);
    assert_eq!(anchors("# A b\n```\n# not a heading\n```\n## C_d (e)\n"), BTreeSet::from(["a-b".to_string(), "c_d-e".to_string()]));
}
