//! Checking that bytes are canonical JSON exactly as [`super`] encodes it: one value,
//! keys sorted by their unescaped bytes and never repeated, integers only, strings
//! escaped exactly as the encoder escapes them, nesting bounded.

/// Why a nested value is not canonical.
pub(crate) type CheckResult = Result<(), &'static str>;

/// Checks that `raw` (valid UTF-8) is one canonical JSON value and nothing else.
#[cfg(test)]
pub(crate) fn check_value(raw: &[u8]) -> CheckResult {
    let mut p = Checker { s: raw, i: 0 };
    p.value(0)?;
    if p.i != raw.len() {
        return Err("trailing bytes after value");
    }
    Ok(())
}

/// Checks one canonical value starting at `start`; returns where it ends.
pub(crate) fn value_end(s: &[u8], start: usize) -> Result<usize, &'static str> {
    let mut p = Checker { s, i: start };
    p.value(0)?;
    Ok(p.i)
}

/// Checks one canonical string starting at `start` (on its opening quote); returns the
/// range of its content, between the quotes.
pub(crate) fn string_at(s: &[u8], start: usize) -> Result<(usize, usize), &'static str> {
    let mut p = Checker { s, i: start };
    p.string()
}

/// Deepest nesting accepted in `args` and `details`.
const MAX_DEPTH: usize = 32;

struct Checker<'a> {
    /// The text being checked.
    s: &'a [u8],
    /// Where the checker is.
    i: usize,
}

impl Checker<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, lit: &[u8]) -> CheckResult {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err("invalid literal")
        }
    }

    fn value(&mut self, depth: usize) -> CheckResult {
        if depth > MAX_DEPTH {
            return Err("nested too deeply");
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.eat(b"true"),
            Some(b'f') => self.eat(b"false"),
            Some(b'n') => self.eat(b"null"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => Err("expected a value"),
        }
    }

    fn object(&mut self, depth: usize) -> CheckResult {
        self.i += 1;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        let mut prev: Option<(usize, usize)> = None;
        loop {
            let (ks, ke) = self.string()?;
            if let Some((ps, pe)) = prev
                && !key_less(&self.s[ps..pe], &self.s[ks..ke])
            {
                return Err("object keys not in ascending order (or repeated)");
            }
            prev = Some((ks, ke));
            if self.peek() != Some(b':') {
                return Err("expected ':'");
            }
            self.i += 1;
            self.value(depth + 1)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err("expected ',' or '}'"),
            }
        }
    }

    fn array(&mut self, depth: usize) -> CheckResult {
        self.i += 1;
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(depth + 1)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err("expected ',' or ']'"),
            }
        }
    }

    /// Checks a canonical string; returns the byte range of its escaped content.
    fn string(&mut self) -> Result<(usize, usize), &'static str> {
        if self.peek() != Some(b'"') {
            return Err("expected a string");
        }
        self.i += 1;
        let start = self.i;
        loop {
            let b = self.peek().ok_or("unterminated string")?;
            match b {
                b'"' => {
                    self.i += 1;
                    return Ok((start, self.i - 1));
                }
                b'\\' => {
                    let e = *self.s.get(self.i + 1).ok_or("unterminated escape")?;
                    match e {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                        b'u' => {
                            let hex = self.s.get(self.i + 2..self.i + 6).ok_or("short \\u")?;
                            let ok = hex[0] == b'0'
                                && hex[1] == b'0'
                                && matches!(hex[2], b'0' | b'1')
                                && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f');
                            if !ok {
                                return Err("\\u escape outside U+0000..U+001F or not lowercase");
                            }
                            let c = u8::from_str_radix(
                                std::str::from_utf8(&hex[2..]).map_err(|_| "bad hex")?,
                                16,
                            )
                            .map_err(|_| "bad hex")?;
                            if matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return Err("\\u escape where a short escape is canonical");
                            }
                            self.i += 6;
                        }
                        _ => return Err("unknown escape"),
                    }
                }
                _ => {
                    // Fast path: jump to the next quote or backslash, then make sure the
                    // run skipped holds no raw control character (both loops vectorise).
                    let rest = &self.s[self.i..];
                    let run = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
                    let controls = rest[..run].iter().fold(0u8, |n, &c| n | u8::from(c < 0x20));
                    if controls != 0 {
                        return Err("raw control character in string");
                    }
                    self.i += run;
                }
            }
        }
    }

    fn integer(&mut self) -> CheckResult {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let body = &self.s[digits..self.i];
        if body.is_empty() {
            return Err("expected digits");
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return Err("not an integer (floats are not canonical)");
        }
        if body.len() > 1 && body[0] == b'0' {
            return Err("leading zero");
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "bad digits")?;
        if text == "-0" {
            return Err("negative zero");
        }
        if text.parse::<i64>().is_err() && text.parse::<u64>().is_err() {
            return Err("integer out of range");
        }
        Ok(())
    }
}

/// Compares two escaped key bodies by their unescaped UTF-8 bytes (strictly less).
fn key_less(a: &[u8], b: &[u8]) -> bool {
    if !a.contains(&b'\\') && !b.contains(&b'\\') {
        return a < b;
    }
    unescape(a) < unescape(b)
}

/// Unescapes a canonical string body (already checked) into its UTF-8 bytes.
pub(crate) fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let e = s.get(i + 1).copied().unwrap_or(b'\\');
        let (byte, len) = match e {
            b'b' => (0x08, 2),
            b'f' => (0x0c, 2),
            b'n' => (b'\n', 2),
            b'r' => (b'\r', 2),
            b't' => (b'\t', 2),
            b'u' => {
                let hex = s.get(i + 4..i + 6).unwrap_or(b"00");
                let v = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .unwrap_or(0);
                (v, 6)
            }
            other => (other, 2),
        };
        out.push(byte);
        i += len;
    }
    out
}
