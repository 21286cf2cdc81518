//! The server name a TLS client asks for: enough of a ClientHello (RFC 8446 §4.1.2, RFC 6066 §3)
//! to read its SNI, so the bash proxy can hold a tunnel to the name its `CONNECT` was allowed
//! for. The hello is reassembled across records and bounded.

/// The largest ClientHello the proxy reads (post-quantum key shares make hellos of a few KiB).
pub const MAX_HELLO: usize = 64 * 1024;

const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
const NAME_TYPE_HOST: u8 = 0;

/// What the bytes so far say.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// Not complete yet: read more.
    Incomplete,
    /// A complete ClientHello, with its server name if it sends one.
    Complete(Option<String>),
    /// Not a TLS ClientHello; why.
    Invalid(&'static str),
}

/// Parse the start of a TLS stream.
pub fn parse(buf: &[u8]) -> Hello {
    // Reassemble the handshake bytes carried by consecutive handshake records.
    let mut handshake = Vec::new();
    let mut at = 0;
    loop {
        if buf.len() < at + 5 {
            return Hello::Incomplete;
        }
        if buf[at] != CONTENT_HANDSHAKE {
            return Hello::Invalid(if at == 0 {
                "not a TLS handshake"
            } else {
                "a TLS record that is not a handshake"
            });
        }
        if buf[at + 1] != 3 {
            return Hello::Invalid("not a TLS record version");
        }
        let len = u16::from_be_bytes([buf[at + 3], buf[at + 4]]) as usize;
        if len == 0 || len > 16 * 1024 + 256 {
            return Hello::Invalid("a TLS record of invalid length");
        }
        if buf.len() < at + 5 + len {
            return Hello::Incomplete;
        }
        handshake.extend_from_slice(&buf[at + 5..at + 5 + len]);
        at += 5 + len;
        if handshake.len() >= 4 {
            if handshake[0] != HANDSHAKE_CLIENT_HELLO {
                return Hello::Invalid("the first handshake message is not a ClientHello");
            }
            let body = u32::from_be_bytes([0, handshake[1], handshake[2], handshake[3]]) as usize;
            if body + 4 > MAX_HELLO {
                return Hello::Invalid("a ClientHello larger than the proxy accepts");
            }
            if handshake.len() >= body + 4 {
                return match server_name(&handshake[4..body + 4]) {
                    Ok(name) => Hello::Complete(name),
                    Err(why) => Hello::Invalid(why),
                };
            }
        }
    }
}

/// A cursor over big-endian TLS fields.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("a truncated ClientHello");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<usize, &'static str> {
        Ok(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Result<usize, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }
}

fn server_name(body: &[u8]) -> Result<Option<String>, &'static str> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    let n = r.u8()?;
    r.take(n)?; // legacy_session_id
    let n = r.u16()?;
    r.take(n)?; // cipher_suites
    let n = r.u8()?;
    r.take(n)?; // legacy_compression_methods
    if r.0.is_empty() {
        return Ok(None);
    }
    let n = r.u16()?;
    let mut exts = Reader(r.take(n)?);
    while !exts.0.is_empty() {
        let kind = exts.u16()? as u16;
        let n = exts.u16()?;
        let data = exts.take(n)?;
        if kind != EXT_SERVER_NAME {
            continue;
        }
        let mut list = Reader(data);
        let n = list.u16()?;
        let mut names = Reader(list.take(n)?);
        while !names.0.is_empty() {
            let kind = names.u8()? as u8;
            let n = names.u16()?;
            let name = names.take(n)?;
            if kind == NAME_TYPE_HOST {
                let name = std::str::from_utf8(name).map_err(|_| "a server name that is not text")?;
                return Ok(Some(name.to_string()));
            }
        }
        return Ok(None);
    }
    Ok(None)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ClientHello record with `sni` (or none), split into records of `chunk` bytes.
    pub(crate) fn client_hello(sni: Option<&str>, chunk: usize) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(0); // session id
        body.extend([0, 2, 0x13, 0x01]); // one cipher suite
        body.extend([1, 0]); // null compression
        let mut exts = Vec::new();
        // An unrelated extension first (supported_versions).
        exts.extend([0, 43, 0, 3, 2, 3, 4]);
        if let Some(name) = sni {
            let n = name.len() as u16;
            exts.extend([0, 0]);
            exts.extend((n + 5).to_be_bytes());
            exts.extend((n + 3).to_be_bytes());
            exts.push(0);
            exts.extend(n.to_be_bytes());
            exts.extend(name.as_bytes());
        }
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut hs = vec![HANDSHAKE_CLIENT_HELLO];
        hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend(body);
        let mut out = Vec::new();
        for piece in hs.chunks(chunk) {
            out.extend([CONTENT_HANDSHAKE, 3, 1]);
            out.extend((piece.len() as u16).to_be_bytes());
            out.extend(piece);
        }
        out
    }

    #[test]
    fn reads_the_server_name() {
        assert_eq!(
            parse(&client_hello(Some("api.example.com"), 4096)),
            Hello::Complete(Some("api.example.com".into()))
        );
        assert_eq!(parse(&client_hello(None, 4096)), Hello::Complete(None));
    }

    #[test]
    fn reassembles_records_and_waits_for_more() {
        let hello = client_hello(Some("a.example"), 7);
        assert_eq!(parse(&hello), Hello::Complete(Some("a.example".into())));
        for cut in [0, 3, 5, 12, hello.len() - 1] {
            assert_eq!(parse(&hello[..cut]), Hello::Incomplete, "cut at {cut}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_client_hello() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Hello::Invalid("not a TLS handshake"));
        let mut hello = client_hello(Some("x.example"), 4096);
        hello[5] = 2; // a ServerHello
        assert_eq!(parse(&hello), Hello::Invalid("the first handshake message is not a ClientHello"));
        let mut truncated = client_hello(Some("x.example"), 4096);
        let len = truncated.len();
        // The server-name list claims to run past its extension.
        truncated[len - 14] = 0xff;
        assert_eq!(parse(&truncated), Hello::Invalid("a truncated ClientHello"));
    }
}
