//! Plain-text columns: cells padded to the widest of their column, no trailing spaces.

#[derive(Clone, Copy)]
pub(super) enum Align {
    Left,
    Right,
}

/// Columns padded to their widest cell (in characters), two spaces apart.
pub(super) struct Table {
    head: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(head: &[(&str, Align)]) -> Table {
        Table {
            head: head.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    pub(super) fn render(&self, out: &mut String, indent: usize) {
        let head: Vec<String> = self.head.iter().map(|(h, _)| h.clone()).collect();
        self.lines(out, indent, std::iter::once(&head).chain(&self.rows));
    }

    pub(super) fn render_headless(&self, out: &mut String, indent: usize) {
        self.lines(out, indent, self.rows.iter());
    }

    fn lines<'a>(
        &self,
        out: &mut String,
        indent: usize,
        rows: impl Iterator<Item = &'a Vec<String>> + Clone,
    ) {
        let width = |s: &str| s.chars().count();
        let mut widths = vec![0; self.head.len()];
        for row in rows.clone() {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        for row in rows {
            let mut line = " ".repeat(indent);
            for (i, ((cell, w), (_, align))) in row.iter().zip(&widths).zip(&self.head).enumerate()
            {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(w - width(cell));
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_aligned_without_trailing_spaces() {
        let mut t = Table::new(&[("a", Align::Left), ("bb", Align::Right), ("c", Align::Left)]);
        t.row(vec!["xyz".into(), "1".into(), String::new()]);
        t.row(vec!["é".into(), "1,000".into(), "z".into()]);
        let mut out = String::new();
        t.render(&mut out, 2);
        assert_eq!(out, "  a       bb  c\n  xyz      1\n  é    1,000  z\n");
    }
}
