//! The seed's XML form of definitions files (see the module
//! documentation of [`super`]).
//!
//! Owns a small hand-written reader of sections, `<metric ...>` entries
//! and their attributes, which keeps line and column for every error.
//! It must never panic on any input nor read files: it is handed the
//! text and the architecture names whose sections apply.

use std::collections::HashMap;

use super::{
    check_counter, check_name, parse_metric_expr, syntax, Counter, Definition, DefsError, Metric,
    MetricSet,
};

pub(super) struct XmlParser<'a> {
    text: &'a str,
    origin: &'a str,
    archs: &'a [&'a str],
    pos: usize,
    line: usize,
    column: usize,
}

struct Section {
    name: String,
    at: (usize, usize),
    applies: bool,
    seen: HashMap<String, (usize, usize)>,
}

struct Attr {
    name: String,
    name_at: (usize, usize),
    value: String,
    /// Where the value text starts, when the file holds it verbatim.
    verbatim_at: Option<(usize, usize)>,
    value_at: (usize, usize),
}

fn is_tag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn is_attr_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `rest` starts with `word=` (spaces allowed before `=`).
fn attr_follows(rest: &str) -> bool {
    let mut chars = rest.chars().peekable();
    match chars.next() {
        Some(c) if is_attr_start(c) => {}
        _ => return false,
    }
    while chars.peek().is_some_and(|&c| is_tag_char(c)) {
        chars.next();
    }
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    chars.next() == Some('=')
}

fn decode_entities(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let decoded = rest.find(';').and_then(|end| {
            let ent = &rest[1..end];
            let c = match ent {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let num = if let Some(h) =
                        ent.strip_prefix("#x").or_else(|| ent.strip_prefix("#X"))
                    {
                        u32::from_str_radix(h, 16).ok()
                    } else if let Some(d) = ent.strip_prefix('#') {
                        d.parse().ok()
                    } else {
                        None
                    };
                    num.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl<'a> XmlParser<'a> {
    pub(super) fn new(text: &'a str, origin: &'a str, archs: &'a [&'a str]) -> Self {
        XmlParser {
            text,
            origin,
            archs,
            pos: 0,
            line: 1,
            column: 1,
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn at(&self) -> (usize, usize) {
        (self.line, self.column)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    /// Moves to byte offset `to` (at or after the current one).
    fn advance_to(&mut self, to: usize) {
        while self.pos < to && self.bump().is_some() {}
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn err(&self, at: (usize, usize), message: String) -> DefsError {
        syntax(self.origin, at, message)
    }

    fn found(&self) -> String {
        match self.peek() {
            Some(c) => format!("{c:?}"),
            None => "the end of the file".to_string(),
        }
    }

    /// Skips a construct that starts here and ends with `end`.
    fn skip_past(&mut self, end: &str, what: &str) -> Result<(), DefsError> {
        let start = self.at();
        match self.rest().find(end) {
            Some(i) => {
                self.advance_to(self.pos + i + end.len());
                Ok(())
            }
            None => Err(self.err(start, format!("{what} is never closed; add {end}"))),
        }
    }

    fn tag_name(&mut self) -> Result<String, DefsError> {
        let start = self.pos;
        while self.peek().is_some_and(is_tag_char) {
            self.bump();
        }
        if self.pos == start {
            return Err(self.err(
                self.at(),
                format!(
                    "expected a tag name after '<', found {}; write <metric ...>, \
                     <global> or an architecture section like <x86_64>",
                    self.found()
                ),
            ));
        }
        Ok(self.text[start..self.pos].to_string())
    }

    pub(super) fn run(mut self) -> Result<MetricSet, DefsError> {
        let mut set = MetricSet::new();
        let mut section: Option<Section> = None;
        let mut metric_open = false;
        loop {
            while self.peek().is_some_and(|c| c != '<') {
                self.bump();
            }
            if self.peek().is_none() {
                break;
            }
            let tag_at = self.at();
            if self.rest().starts_with("<!--") {
                self.skip_past("-->", "comment")?;
                continue;
            }
            if self.rest().starts_with("<?") {
                self.skip_past("?>", "processing instruction")?;
                continue;
            }
            if self.rest().starts_with("<!") {
                self.skip_past(">", "declaration")?;
                continue;
            }
            if self.rest().starts_with("</") {
                self.bump();
                self.bump();
                let name = self.tag_name()?;
                self.skip_ws();
                if self.peek() != Some('>') {
                    return Err(self.err(
                        self.at(),
                        format!("expected '>' to end </{name}>, found {}", self.found()),
                    ));
                }
                self.bump();
                if name == "metric" {
                    if !metric_open {
                        return Err(self.err(
                            tag_at,
                            "</metric> without an open <metric ...>; remove it".to_string(),
                        ));
                    }
                    metric_open = false;
                    continue;
                }
                match &section {
                    Some(s) if s.name == name => {
                        section = None;
                        metric_open = false;
                    }
                    Some(s) => {
                        return Err(self.err(
                            tag_at,
                            format!(
                                "</{name}> does not close the open section <{}> (line {}, \
                                 column {}); write </{}>",
                                s.name, s.at.0, s.at.1, s.name
                            ),
                        ))
                    }
                    None => {
                        return Err(self.err(
                            tag_at,
                            format!("</{name}> without an open <{name}>; remove it"),
                        ))
                    }
                }
                continue;
            }
            // An opening tag.
            self.bump();
            let name = self.tag_name()?;
            let (attrs, self_closing) = self.attributes(&name, tag_at)?;
            if name == "metric" {
                let Some(sec) = section.as_mut() else {
                    return Err(self.err(
                        tag_at,
                        "<metric> outside a section; put it inside <global>...</global> or \
                         an architecture section like <x86_64>...</x86_64>"
                            .to_string(),
                    ));
                };
                let def = self.entry(attrs, tag_at)?;
                if let Some(first) = sec.seen.get(def.name()) {
                    return Err(self.err(
                        tag_at,
                        format!(
                            "`{}` is defined twice in section <{}> (first at line {}, column \
                             {}); remove or rename one",
                            def.name(),
                            sec.name,
                            first.0,
                            first.1
                        ),
                    ));
                }
                sec.seen.insert(def.name().to_string(), tag_at);
                if sec.applies {
                    set.insert(def);
                }
                metric_open = !self_closing;
                continue;
            }
            if let Some(s) = &section {
                return Err(self.err(
                    tag_at,
                    format!(
                        "<{name}> inside section <{}> (line {}, column {}): sections do not \
                         nest and entries are written <metric ...>; close </{}> first",
                        s.name, s.at.0, s.at.1, s.name
                    ),
                ));
            }
            if self_closing {
                continue;
            }
            let applies = name.eq_ignore_ascii_case("global")
                || self.archs.iter().any(|a| a.eq_ignore_ascii_case(&name));
            section = Some(Section {
                name,
                at: tag_at,
                applies,
                seen: HashMap::new(),
            });
            metric_open = false;
        }
        if let Some(s) = section {
            return Err(self.err(
                s.at,
                format!("section <{}> is never closed; add </{}>", s.name, s.name),
            ));
        }
        Ok(set)
    }

    /// Reads attributes up to and including the `>` or `/>` that ends the
    /// tag; returns them and whether the tag closed itself.
    fn attributes(
        &mut self,
        tag: &str,
        tag_at: (usize, usize),
    ) -> Result<(Vec<Attr>, bool), DefsError> {
        let unclosed = |p: &Self| {
            p.err(
                tag_at,
                format!("tag <{tag}> is never closed; add '>' at the end of it"),
            )
        };
        let mut attrs = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Err(unclosed(self)),
                Some('>') => {
                    self.bump();
                    return Ok((attrs, false));
                }
                Some('/') if self.rest().starts_with("/>") => {
                    self.bump();
                    self.bump();
                    return Ok((attrs, true));
                }
                Some(c) if is_attr_start(c) => {
                    let name_at = self.at();
                    let start = self.pos;
                    while self.peek().is_some_and(is_tag_char) {
                        self.bump();
                    }
                    let name = self.text[start..self.pos].to_string();
                    self.skip_ws();
                    if self.peek() != Some('=') {
                        return Err(self.err(
                            self.at(),
                            format!(
                                "expected '=' after the attribute name `{name}` in <{tag}>, \
                                 found {}; write {name}=value",
                                self.found()
                            ),
                        ));
                    }
                    self.bump();
                    self.skip_ws();
                    attrs.push(self.value(name, name_at, tag, tag_at)?);
                }
                Some(_) => {
                    return Err(self.err(
                        self.at(),
                        format!(
                            "unexpected {} in <{tag}>; expected an attribute like name=value, \
                             '>' or '/>'",
                            self.found()
                        ),
                    ))
                }
            }
        }
    }

    /// Reads the value of attribute `name` (whose `=` has been read).
    fn value(
        &mut self,
        name: String,
        name_at: (usize, usize),
        tag: &str,
        tag_at: (usize, usize),
    ) -> Result<Attr, DefsError> {
        let attr = name.as_str();
        let value_at = self.at();
        if let Some(q @ ('"' | '\'')) = self.peek() {
            self.bump();
            let start_at = self.at();
            let start = self.pos;
            let Some(len) = self.rest().find(q) else {
                return Err(self.err(
                    value_at,
                    format!("the value of `{attr}` is never closed; add the closing {q}"),
                ));
            };
            self.advance_to(start + len);
            let raw = &self.text[start..self.pos];
            self.bump();
            let value = decode_entities(raw);
            let verbatim = (value == raw).then_some(start_at);
            return Ok(Attr {
                name,
                name_at,
                value,
                verbatim_at: verbatim,
                value_at: start_at,
            });
        }
        let start = self.pos;
        let mut end;
        loop {
            end = self.pos;
            match self.peek() {
                None => {
                    return Err(self.err(
                        tag_at,
                        format!("tag <{tag}> is never closed; add '>' at the end of it"),
                    ))
                }
                Some('>') => break,
                Some('/') if self.rest().starts_with("/>") => break,
                Some('<') => {
                    return Err(self.err(
                        self.at(),
                        format!(
                            "unexpected '<' in the value of `{attr}`: is the '>' that ends \
                             <{tag}> missing?"
                        ),
                    ))
                }
                Some(c) if c.is_whitespace() => {
                    self.skip_ws();
                    let rest = self.rest();
                    if rest.is_empty()
                        || rest.starts_with('>')
                        || rest.starts_with("/>")
                        || attr_follows(rest)
                    {
                        break;
                    }
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let raw = &self.text[start..end];
        if raw.is_empty() {
            return Err(self.err(
                value_at,
                format!(
                    "expected a value after `{attr}=`, found {}; write {attr}=value or \
                     {attr}=\"value\"",
                    self.found()
                ),
            ));
        }
        let value = decode_entities(raw);
        let verbatim = (value == raw).then_some(value_at);
        Ok(Attr {
            name,
            name_at,
            value,
            verbatim_at: verbatim,
            value_at,
        })
    }

    fn entry(&self, attrs: Vec<Attr>, tag_at: (usize, usize)) -> Result<Definition, DefsError> {
        const KNOWN: [&str; 7] = [
            "name",
            "block",
            "event",
            "expr",
            "descr",
            "description",
            "unit",
        ];
        let mut got: HashMap<&'static str, Attr> = HashMap::new();
        for a in attrs {
            let Some(key) = KNOWN.iter().find(|k| **k == a.name) else {
                return Err(self.err(
                    a.name_at,
                    format!(
                        "unknown attribute `{}` in <metric>; expected name, block, event, \
                         expr, descr (or description) and unit",
                        a.name
                    ),
                ));
            };
            let key: &'static str = if *key == "descr" { "description" } else { key };
            if got.contains_key(key) {
                return Err(self.err(
                    a.name_at,
                    format!(
                        "attribute `{}` given twice in one <metric>; keep one",
                        a.name
                    ),
                ));
            }
            got.insert(key, a);
        }
        let defined_at = format!("{}:{}:{}", self.origin, tag_at.0, tag_at.1);
        let Some(name_attr) = got.remove("name") else {
            return Err(self.err(
                tag_at,
                "<metric> without name=; add name=SOME_NAME".to_string(),
            ));
        };
        let name = name_attr.value;
        check_name(&name).map_err(|m| self.err(name_attr.value_at, m))?;
        let description = got.remove("description").map(|a| a.value);
        let unit = got.remove("unit").map(|a| a.value);
        let block = got.remove("block");
        let event = got.remove("event");
        if let Some(e) = got.remove("expr") {
            if let Some(extra) = block.as_ref().or(event.as_ref()) {
                return Err(self.err(
                    extra.name_at,
                    format!(
                        "metric `{name}` has both expr= and {}=; a <metric> is either a \
                         counter (block=, event=) or derived (expr=)",
                        extra.name
                    ),
                ));
            }
            let expr = parse_metric_expr(self.origin, &name, &e.value, e.verbatim_at, e.value_at)?;
            return Ok(Definition::Metric(Metric {
                name,
                expr,
                expr_text: e.value.trim().to_string(),
                description,
                unit,
                defined_at,
            }));
        }
        let Some(event) = event else {
            return Err(self.err(
                tag_at,
                format!(
                    "metric `{name}` has neither event= (a counter, with block=) nor expr= \
                     (a derived metric); add one"
                ),
            ));
        };
        let block = block
            .map(|b| b.value.trim().to_string())
            .unwrap_or_default();
        let event_text = event.value.trim().to_string();
        check_counter(&name, &block, &event_text).map_err(|m| self.err(event.value_at, m))?;
        Ok(Definition::Counter(Counter {
            name,
            block,
            event: event_text,
            description,
            unit,
            defined_at,
        }))
    }
}
