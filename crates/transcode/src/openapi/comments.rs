//! Leading comments from the schema's source info, as descriptions.

use std::collections::HashMap;

use prost_reflect::FileDescriptor;

/// Leading comments from the schema's source info (descriptor sets built with it), by file
/// and element path.
#[derive(Default)]
pub(super) struct Comments {
    files: HashMap<String, HashMap<Vec<i32>, String>>,
}

impl Comments {
    pub(super) fn get(&mut self, file: &FileDescriptor, path: &[i32]) -> Option<String> {
        self.files
            .entry(file.name().to_owned())
            .or_insert_with(|| {
                let Some(info) = &file.file_descriptor_proto().source_code_info else {
                    return HashMap::new();
                };
                info.location
                    .iter()
                    .filter_map(|l| {
                        let text = clean_comment(l.leading_comments.as_deref()?);
                        (!text.is_empty()).then(|| (l.path.clone(), text))
                    })
                    .collect()
            })
            .get(path)
            .cloned()
    }
}

fn clean_comment(c: &str) -> String {
    let lines: Vec<&str> = c
        .lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect();
    lines.join("\n").trim().to_owned()
}
