//! Newline-delimited messages with a size bound, read without holding an oversized
//! message in memory: past the bound the rest of the line is skipped, not buffered.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line (without its `\n`).
    Message(Vec<u8>),
    /// A line longer than the bound; its bytes were discarded.
    TooLong {
        /// How many bytes it had.
        len: u64,
    },
    /// End of input.
    Eof,
}

/// Reads the next line, keeping at most `max` bytes of it.
pub async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut len: u64 = 0;
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            if len == 0 {
                return Ok(Line::Eof);
            }
            break;
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        len += part.len() as u64;
        if !too_long {
            if buf.len() + part.len() > max {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let consumed = done.unwrap_or(chunk.len());
        r.consume(consumed);
        if done.is_some() {
            break;
        }
    }
    if too_long {
        return Ok(Line::TooLong { len });
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Line::Message(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_lines() {
        let data = b"abc\nxxxxxxxxxx\nde\r\nlast".to_vec();
        let mut r = tokio::io::BufReader::with_capacity(4, &data[..]);
        assert_eq!(
            read_line(&mut r, 5).await.unwrap(),
            Line::Message(b"abc".to_vec())
        );
        assert_eq!(
            read_line(&mut r, 5).await.unwrap(),
            Line::TooLong { len: 10 }
        );
        assert_eq!(
            read_line(&mut r, 5).await.unwrap(),
            Line::Message(b"de".to_vec())
        );
        assert_eq!(
            read_line(&mut r, 5).await.unwrap(),
            Line::Message(b"last".to_vec())
        );
        assert_eq!(read_line(&mut r, 5).await.unwrap(), Line::Eof);
    }
}
