//! Conformance tooling (spec 15): the corpus loader, the runner and the report. [`read_dir`] is the
//! library's only I/O; everything else is pure over bytes.

pub mod corpus;
pub mod report;
pub mod runner;

use std::collections::BTreeMap;
use std::path::Path;

pub use corpus::Corpus;
pub use report::Report;

/// Per-file byte ceiling when reading a corpus directory (notes 6).
pub const MAX_FILE_BYTES: u64 = 5_000_000;
/// Maximum number of files read from a corpus directory.
pub const MAX_FILES: usize = 10_000;

/// Why a corpus directory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("corpus unreadable: a file is missing, unreadable, or over the byte ceiling")]
pub struct ReadError {
    /// The path that failed.
    pub path: String,
}

/// Read every file under `dir`, recursively, dotfiles included, keyed by `/`-separated relative path.
pub fn read_dir(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, ReadError> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let err = |p: &Path| ReadError {
            path: p.display().to_string(),
        };
        for entry in std::fs::read_dir(&d).map_err(|_| err(&d))? {
            let path = entry.map_err(|_| err(&d))?.path();
            let meta = std::fs::metadata(&path).map_err(|_| err(&path))?;
            if meta.is_dir() {
                stack.push(path);
                continue;
            }
            if meta.len() > MAX_FILE_BYTES || out.len() >= MAX_FILES {
                return Err(err(&path));
            }
            let rel = path.strip_prefix(dir).map_err(|_| err(&path))?;
            let key = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.insert(key, std::fs::read(&path).map_err(|_| err(&path))?);
        }
    }
    Ok(out)
}

/// Load, run and report in one call (the `aip abp conformance` pipeline).
pub fn run_files(
    files: &BTreeMap<String, Vec<u8>>,
) -> crate::Result<(Report, Vec<runner::Outcome>)> {
    let corpus = Corpus::load(files)?;
    let outcomes = runner::run(&corpus);
    Ok((Report::new(&outcomes, corpus.corpus_digest), outcomes))
}
