//! The files one load reads — the config file, descriptor sets, the `.proto` files the
//! configuration names — each read once ([`Disk`]). A snapshot is built from these bytes and
//! the reload (reload.rs) notes these same bytes as loaded, so a file written while the load
//! runs, or just after, differs from what is noted and is reloaded; reading the files again to
//! note them would take such a write as loaded though it never was.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

/// Each file as first read by one load (by absolute path), or why it could not be.
#[derive(Default)]
pub struct Disk {
    read: BTreeMap<PathBuf, Result<Vec<u8>, (io::ErrorKind, String)>>,
}

impl Disk {
    /// `path`'s bytes as this load first read them.
    pub fn read(&mut self, path: &Path) -> io::Result<Vec<u8>> {
        let read = self.entry(path);
        read.clone()
            .map_err(|(kind, message)| io::Error::new(kind, message))
    }

    /// `path`'s text as this load first read it (as `std::fs::read_to_string`).
    pub fn read_to_string(&mut self, path: &Path) -> io::Result<String> {
        String::from_utf8(self.read(path)?).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            )
        })
    }

    /// A hash of `files`' contents as this load read them (those it did not read are read
    /// now); a file that cannot be read hashes as its error's kind.
    pub fn fingerprint(&mut self, files: &BTreeSet<PathBuf>) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        for file in files {
            file.hash(&mut hasher);
            match self.entry(file) {
                Ok(bytes) => bytes.hash(&mut hasher),
                Err((kind, _)) => kind.hash(&mut hasher),
            }
        }
        hasher.finish()
    }

    fn entry(&mut self, path: &Path) -> &Result<Vec<u8>, (io::ErrorKind, String)> {
        let absolute = absolute(path);
        self.read
            .entry(absolute)
            .or_insert_with_key(|path| std::fs::read(path).map_err(|e| (e.kind(), e.to_string())))
    }
}

/// `path` made absolute (not resolving links: a ConfigMap's files are links swapped beneath
/// them), as files are watched and read.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_once_and_its_fingerprint_is_of_those_bytes() {
        let dir = std::env::temp_dir().join(format!("protogate-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.toml");
        let missing = dir.join("missing.toml");
        std::fs::write(&file, "one").unwrap();
        let files: BTreeSet<PathBuf> = [file.clone(), missing.clone()].into();
        let mut disk = Disk::default();
        assert_eq!(disk.read_to_string(&file).unwrap(), "one");
        let before = disk.fingerprint(&files);
        std::fs::write(&file, "two").unwrap();
        // The load goes on with what it read.
        assert_eq!(disk.read(&file).unwrap(), b"one");
        assert_eq!(disk.fingerprint(&files), before);
        let error = disk.read(&missing).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        // A new load reads the new text, and its fingerprint differs.
        let mut again = Disk::default();
        assert_ne!(again.fingerprint(&files), before);
        assert_eq!(again.read(&file).unwrap(), b"two");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
