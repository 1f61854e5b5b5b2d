//! Property tests of the RESP request parser and reply writer.

use bytes::{Buf, Bytes, BytesMut};
use proptest::prelude::*;
use tessera_node::resp::{Limits, Out, Parser};

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Feeds `input` in chunks of the given sizes; returns every parsed request or the error.
fn feed(input: &[u8], chunks: &[usize]) -> Result<Vec<Vec<Bytes>>, String> {
    let mut p = Parser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut ci = 0;
    while pos < input.len() {
        let n = chunks.get(ci).copied().unwrap_or(input.len()).max(1);
        ci += 1;
        let end = (pos + n).min(input.len());
        buf.extend_from_slice(&input[pos..end]);
        pos = end;
        // Each complete request's arguments are views of `buf`, copied before its bytes
        // are dropped (as the connection loop runs them before advancing).
        while let Some(len) = p
            .parse(&buf, Limits::default())
            .map_err(|e| e.to_string())?
        {
            let mut args = Vec::new();
            p.args(&buf, &mut args);
            if !args.is_empty() {
                out.push(args.iter().map(|a| Bytes::copy_from_slice(a)).collect());
            }
            buf.advance(len);
        }
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn multibulk_roundtrip_any_split(
        reqs in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6), 1..8),
        chunks in prop::collection::vec(1usize..17, 0..64),
    ) {
        let mut input = Vec::new();
        for r in &reqs {
            input.extend(encode(r));
        }
        let got = feed(&input, &chunks).unwrap();
        prop_assert_eq!(got.len(), reqs.len());
        for (g, r) in got.iter().zip(&reqs) {
            let g: Vec<Vec<u8>> = g.iter().map(|b| b.to_vec()).collect();
            prop_assert_eq!(&g, r);
        }
    }

    #[test]
    fn inline_words_roundtrip(words in prop::collection::vec("[a-zA-Z0-9_:.-]{1,12}", 1..8)) {
        let line = format!("{}\r\n", words.join(" "));
        let got = feed(line.as_bytes(), &[]).unwrap();
        prop_assert_eq!(got.len(), 1);
        let g: Vec<String> = got[0].iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect();
        prop_assert_eq!(g, words);
    }

    #[test]
    fn garbage_never_panics(input in prop::collection::vec(any::<u8>(), 0..512), chunks in prop::collection::vec(1usize..64, 0..16)) {
        let _ = feed(&input, &chunks);
    }

    #[test]
    fn writer_bulk_array_is_parseable(items in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..30), 1..10)) {
        // A reply array of bulk strings has the same framing as a request: parse it back.
        let mut o = Out::new(false);
        o.bulks(items.iter());
        let got = feed(&o.buf, &[]).unwrap();
        let g: Vec<Vec<u8>> = got[0].iter().map(|b| b.to_vec()).collect();
        prop_assert_eq!(g, items);
    }

    #[test]
    fn integers_and_maps(n in any::<i64>(), pairs in 0usize..5) {
        let mut o2 = Out::new(false);
        o2.int(n);
        o2.map(pairs);
        prop_assert_eq!(o2.buf.to_vec(), format!(":{n}\r\n*{}\r\n", pairs * 2).into_bytes());
        let mut o3 = Out::new(true);
        o3.map(pairs);
        o3.null();
        prop_assert_eq!(o3.buf.to_vec(), format!("%{pairs}\r\n_\r\n").into_bytes());
    }
}
