//! A fresh directory for one test, removed when dropped.

use std::path::PathBuf;

/// `<temp>/mc-<tag>-<pid>`, emptied at creation and removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates (or empties) the directory for `tag`.
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("mc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
