//! The pipeline grammar: pass order as data.
//!
//! ```text
//! pipeline := ε | item (',' item)*
//! item     := NAME options? | 'fixpoint' '(' 'max' '=' INT ')' '[' pipeline ']'
//! options  := '{' NAME '=' VALUE (',' NAME '=' VALUE)* '}'
//! NAME     := [A-Za-z0-9_-]+        VALUE := [A-Za-z0-9_.+-]+
//! ```
//!
//! Whitespace between tokens is ignored. [`Pipeline::parse`] reports the first error with its
//! 1-based column and a caret ([`PipelineError::render`]); [`Pipeline::check`] then resolves
//! names and options against a [`PassRegistry`] and reports unknown passes, unknown options and
//! bad values at the item that has them. `Display` prints the canonical form: no whitespace,
//! options in the order the pass declares them, values normalized (`check` returns the
//! normalized pipeline), so that printing a parsed canonical string gives it back.
//!
//! Example: `verify,fixpoint(max=8)[algsimp,cse,dce],constant-folding{max_elements=1024}`.

use std::fmt;

use crate::pass::PassRegistry;

/// One element of a pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PipelineItem {
    /// A pass with options given as `name=value` text.
    Pass {
        /// The pass name.
        name: String,
        /// Options in the order given (after [`Pipeline::check`]: spec order, normalized).
        options: Vec<(String, String)>,
        /// Byte offset of the name in the parsed text (0 when built in code).
        offset: usize,
    },
    /// `fixpoint(max=N)[...]`: run the body until no pass in it changes the module, at most
    /// `max` times.
    Fixpoint {
        /// The iteration limit (at least 1).
        max: u32,
        /// The body.
        body: Vec<PipelineItem>,
        /// Byte offset of `fixpoint` in the parsed text.
        offset: usize,
    },
}

/// A parsed pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pipeline {
    /// The top-level items, in order.
    pub items: Vec<PipelineItem>,
}

/// A pipeline syntax or resolution error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineError {
    /// 1-based column (in characters) of the error in the pipeline text.
    pub col: usize,
    /// What is wrong.
    pub msg: String,
    /// The pipeline text.
    pub text: String,
}

impl PipelineError {
    /// `pipeline:1:COL: error: MSG`, the text, and a caret under the column.
    pub fn render(&self) -> String {
        format!(
            "pipeline:1:{}: error: {}\n{}\n{}^\n",
            self.col,
            self.msg,
            self.text,
            " ".repeat(self.col.saturating_sub(1))
        )
    }
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pipeline:1:{}: error: {}", self.col, self.msg)
    }
}

impl std::error::Error for PipelineError {}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_value_byte(b: u8) -> bool {
    is_name_byte(b) || b == b'.' || b == b'+'
}

impl<'a> Lexer<'a> {
    fn err(&self, at: usize, msg: impl Into<String>) -> PipelineError {
        PipelineError {
            col: self.text[..at.min(self.text.len())].chars().count() + 1,
            msg: msg.into(),
            text: self.text.to_string(),
        }
    }

    fn skip_ws(&mut self) {
        while self.pos < self.text.len() && self.text.as_bytes()[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.as_bytes().get(self.pos).copied()
    }

    fn describe_here(&mut self) -> String {
        match self.peek() {
            None => "end of pipeline".to_string(),
            Some(_) => {
                let c = self.text[self.pos..].chars().next().unwrap_or(' ');
                format!("'{c}'")
            }
        }
    }

    fn expect(&mut self, b: u8, what: &str) -> Result<(), PipelineError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            let found = self.describe_here();
            Err(self.err(self.pos, format!("expected {what}, found {found}")))
        }
    }

    fn word(&mut self, value: bool, what: &str) -> Result<(usize, &'a str), PipelineError> {
        self.skip_ws();
        let start = self.pos;
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len()
            && (if value {
                is_value_byte(bytes[self.pos])
            } else {
                is_name_byte(bytes[self.pos])
            })
        {
            self.pos += 1;
        }
        if self.pos == start {
            let found = self.describe_here();
            return Err(self.err(start, format!("expected {what}, found {found}")));
        }
        Ok((start, &self.text[start..self.pos]))
    }

    /// items until end of text (`close` None) or until `]`.
    fn items(&mut self, nested: bool) -> Result<Vec<PipelineItem>, PipelineError> {
        let mut items = Vec::new();
        match self.peek() {
            None if !nested => return Ok(items),
            Some(b']') if nested => {
                return Err(self.err(self.pos, "a fixpoint group needs at least one pass"))
            }
            _ => {}
        }
        loop {
            items.push(self.item()?);
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    if matches!(self.peek(), None | Some(b']')) {
                        let found = self.describe_here();
                        return Err(self.err(
                            self.pos,
                            format!("expected a pass name after ',', found {found}"),
                        ));
                    }
                }
                None if !nested => return Ok(items),
                Some(b']') if nested => return Ok(items),
                _ => {
                    let found = self.describe_here();
                    let want = if nested { "',' or ']'" } else { "','" };
                    return Err(self.err(self.pos, format!("expected {want}, found {found}")));
                }
            }
        }
    }

    fn item(&mut self) -> Result<PipelineItem, PipelineError> {
        let (start, name) = self.word(false, "a pass name")?;
        if name == "fixpoint" {
            self.expect(b'(', "'(' after fixpoint (fixpoint(max=N)[...])")?;
            let (kpos, key) = self.word(false, "'max'")?;
            if key != "max" {
                return Err(self.err(
                    kpos,
                    format!("unknown fixpoint option '{key}' (fixpoint takes max=N)"),
                ));
            }
            self.expect(b'=', "'=' after max")?;
            let (vpos, v) = self.word(true, "an iteration limit")?;
            let max: u32 = match v.parse() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(self.err(
                        vpos,
                        format!("fixpoint max must be a positive integer, found '{v}'"),
                    ))
                }
            };
            self.expect(b')', "')' after the iteration limit")?;
            self.expect(b'[', "'[' opening the fixpoint group")?;
            let body = self.items(true)?;
            self.expect(b']', "']' closing the fixpoint group")?;
            return Ok(PipelineItem::Fixpoint {
                max,
                body,
                offset: start,
            });
        }
        let mut options = Vec::new();
        if self.peek() == Some(b'(') {
            return Err(self.err(
                self.pos,
                format!(
                    "'(' after '{name}': only fixpoint takes (max=N); pass options go in {{k=v}}"
                ),
            ));
        }
        if self.peek() == Some(b'{') {
            self.pos += 1;
            loop {
                let (_, k) = self.word(false, "an option name")?;
                self.expect(b'=', &format!("'=' after option '{k}'"))?;
                let (_, v) = self.word(true, &format!("a value for option '{k}'"))?;
                options.push((k.to_string(), v.to_string()));
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => {
                        let found = self.describe_here();
                        return Err(
                            self.err(self.pos, format!("expected ',' or '}}', found {found}"))
                        );
                    }
                }
            }
        }
        Ok(PipelineItem::Pass {
            name: name.to_string(),
            options,
            offset: start,
        })
    }
}

impl Pipeline {
    /// Parses pipeline text (syntax only; see [`Pipeline::check`] for names and options).
    pub fn parse(text: &str) -> Result<Pipeline, PipelineError> {
        let mut lx = Lexer { text, pos: 0 };
        let items = lx.items(false)?;
        Ok(Pipeline { items })
    }

    /// Parses `text` and resolves it against `registry`: every pass must exist and its options
    /// must be known and well typed. Returns the normalized pipeline (canonical when printed).
    pub fn parse_checked(text: &str, registry: &PassRegistry) -> Result<Pipeline, PipelineError> {
        Pipeline::parse(text)?.check(registry, text)
    }

    /// Resolves names and options against `registry` (errors point into `text`, the text this
    /// pipeline was parsed from). Returns the normalized pipeline.
    pub fn check(&self, registry: &PassRegistry, text: &str) -> Result<Pipeline, PipelineError> {
        fn go(
            items: &[PipelineItem],
            reg: &PassRegistry,
            text: &str,
        ) -> Result<Vec<PipelineItem>, PipelineError> {
            let err = |offset: usize, msg: String| PipelineError {
                col: text[..offset.min(text.len())].chars().count() + 1,
                msg,
                text: text.to_string(),
            };
            let mut out = Vec::with_capacity(items.len());
            for it in items {
                match it {
                    PipelineItem::Pass {
                        name,
                        options,
                        offset,
                    } => {
                        let Some(info) = reg.get(name) else {
                            return Err(err(*offset, unknown_pass_message(name, reg)));
                        };
                        let opts = crate::pass::PassOptions::resolve(info.options, options)
                            .map_err(|e| err(*offset, format!("pass '{name}': {e}")))?;
                        out.push(PipelineItem::Pass {
                            name: name.clone(),
                            options: opts
                                .explicit()
                                .into_iter()
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect(),
                            offset: *offset,
                        });
                    }
                    PipelineItem::Fixpoint { max, body, offset } => {
                        out.push(PipelineItem::Fixpoint {
                            max: *max,
                            body: go(body, reg, text)?,
                            offset: *offset,
                        });
                    }
                }
            }
            Ok(out)
        }
        Ok(Pipeline {
            items: go(&self.items, registry, text)?,
        })
    }

    /// Every pass name in the pipeline, in order, with repeats.
    pub fn pass_names(&self) -> Vec<&str> {
        fn go<'a>(items: &'a [PipelineItem], out: &mut Vec<&'a str>) {
            for it in items {
                match it {
                    PipelineItem::Pass { name, .. } => out.push(name),
                    PipelineItem::Fixpoint { body, .. } => go(body, out),
                }
            }
        }
        let mut out = Vec::new();
        go(&self.items, &mut out);
        out
    }
}

fn unknown_pass_message(name: &str, reg: &PassRegistry) -> String {
    let names = reg.names();
    let close = names
        .iter()
        .filter(|n| edit_distance(n, name) <= 2 || n.contains(name) || name.contains(*n))
        .copied()
        .collect::<Vec<_>>();
    if close.is_empty() {
        format!(
            "unknown pass '{name}' (`axle passes` lists them: {})",
            names.join(", ")
        )
    } else {
        format!(
            "unknown pass '{name}'; did you mean {}?",
            close.join(" or ")
        )
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

impl fmt::Display for PipelineItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineItem::Pass { name, options, .. } => {
                f.write_str(name)?;
                if !options.is_empty() {
                    f.write_str("{")?;
                    for (i, (k, v)) in options.iter().enumerate() {
                        if i > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "{k}={v}")?;
                    }
                    f.write_str("}")?;
                }
                Ok(())
            }
            PipelineItem::Fixpoint { max, body, .. } => {
                write!(f, "fixpoint(max={max})[")?;
                write_items(f, body)?;
                f.write_str("]")
            }
        }
    }
}

fn write_items(f: &mut fmt::Formatter<'_>, items: &[PipelineItem]) -> fmt::Result {
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{it}")?;
    }
    Ok(())
}

impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_items(f, &self.items)
    }
}
