//! RFC 8785 JSON Canonicalization Scheme (spec 4): UTF-16 member order, ECMAScript number
//! formatting, minimal string escaping.

use std::cmp::Ordering;

use crate::error::{CeilingKey, Code, Error, Result};
use crate::json::{Number, Value};

/// The canonical bytes of `value`.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = String::with_capacity(256);
    write_value(&mut out, value);
    out.into_bytes()
}

/// The canonical bytes of `value`, denying `ceiling:bytes` when they exceed `max_bytes` (notes 11: the
/// canonicalization surface applies the bytes override to the encoder output).
pub fn encode_bounded(value: &Value, max_bytes: usize) -> Result<Vec<u8>> {
    let out = encode(value);
    if out.len() > max_bytes {
        return Err(Error::new(Code::Ceiling(CeilingKey::Bytes), "bytes"));
    }
    Ok(out)
}

/// Compare member names as sequences of UTF-16 code units (RFC 8785 3.2.3). UTF-8 byte order equals
/// code point order, which differs from UTF-16 order only between U+E000..U+FFFF and the
/// supplementary planes, so only the first differing characters need the UTF-16 view.
pub fn utf16_cmp(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let Some(i) = ab.iter().zip(bb).position(|(x, y)| x != y) else {
        return ab.len().cmp(&bb.len());
    };
    // The prefixes are equal, so both strings share this character boundary.
    let mut start = i;
    while start > 0 && !a.is_char_boundary(start) {
        start -= 1;
    }
    match (a[start..].chars().next(), b[start..].chars().next()) {
        (Some(x), Some(y)) => first_unit(x).cmp(&first_unit(y)).then(x.cmp(&y)),
        _ => ab.len().cmp(&bb.len()),
    }
}

/// The first UTF-16 code unit of `c` (its high surrogate above the BMP).
fn first_unit(c: char) -> u32 {
    let c = c as u32;
    if c >= 0x10000 {
        0xD800 + ((c - 0x10000) >> 10)
    } else {
        c
    }
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, *n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            let members = o.as_slice();
            // Small objects sort an index array on the stack; larger ones sort a heap vector.
            let mut small = [0u16; 16];
            let mut large: Vec<usize> = Vec::new();
            let order: &[u16] = if members.len() <= small.len() {
                let idx = &mut small[..members.len()];
                for (i, slot) in idx.iter_mut().enumerate() {
                    *slot = i as u16;
                }
                idx.sort_unstable_by(|a, b| {
                    utf16_cmp(&members[usize::from(*a)].0, &members[usize::from(*b)].0)
                });
                idx
            } else {
                large.extend(0..members.len());
                large.sort_unstable_by(|a, b| utf16_cmp(&members[*a].0, &members[*b].0));
                &[]
            };
            let mut emit = |n: usize, i: usize| {
                if n > 0 {
                    out.push(',');
                }
                let (k, v) = &members[i];
                write_string(out, k);
                out.push(':');
                write_value(out, v);
            };
            for (n, i) in order.iter().enumerate() {
                emit(n, usize::from(*i));
            }
            for (n, i) in large.iter().enumerate() {
                emit(n, *i);
            }
            out.push('}');
        }
    }
}

/// Bytes that need an escape: controls, `"` and `\\`.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Write a string with the RFC 8785 3.2.2.2 escapes.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !NEEDS_ESCAPE[usize::from(b)] {
            continue;
        }
        out.push_str(&s[start..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Write a number in ECMAScript `Number::toString` form (ECMA-262 7.1.12.1, RFC 8785 3.2.2.3).
pub fn write_number(out: &mut String, n: Number) {
    let f = match n {
        Number::Int(i) => return write_int(out, i),
        Number::Float(f) => f.get(),
    };
    if f == 0.0 {
        out.push('0');
        return;
    }
    // Integral doubles up to 2^53 are their own shortest digits.
    if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 {
        return write_int(out, f as i64);
    }
    if f < 0.0 {
        out.push('-');
    }
    // Ryu yields the shortest round-trip digits, closest to the value, ties to even: ECMA-262 Note 2.
    let mut buf = ryu::Buffer::new();
    let (digits, n) = decimal_parts(buf.format_finite(f.abs()));
    let digits = std::str::from_utf8(&digits.0[..digits.1]).unwrap_or("0");
    let k = digits.len() as i32;
    if k <= n && n <= 21 {
        out.push_str(digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        write_int(out, i64::from((n - 1).abs()));
    }
}

/// Split a positive decimal lexeme (`123.45`, `1e21`, `1.5e-7`) into its significant digits and `n`,
/// where the value is `0.d1d2... * 10^n`.
fn decimal_parts(lexeme: &str) -> (([u8; 40], usize), i32) {
    let (mantissa, exp) = lexeme.split_once(['e', 'E']).unwrap_or((lexeme, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits = [0u8; 40];
    let mut len = 0;
    let mut point = None;
    let mut leading = 0;
    for b in mantissa.bytes() {
        match b {
            b'.' => point = Some(len + leading),
            b'0' if len == 0 => leading += 1,
            b'0'..=b'9' if len < digits.len() => {
                digits[len] = b;
                len += 1;
            }
            _ => {}
        }
    }
    let int_digits = point.unwrap_or(len + leading) as i32;
    while len > 1 && digits[len - 1] == b'0' {
        len -= 1;
    }
    ((digits, len), int_digits - leading as i32 + exp)
}

/// Write an integer without allocating.
fn write_int(out: &mut String, i: i64) {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    let mut n = i.unsigned_abs();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        out.push('-');
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[pos..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{DecodeBounds, decode};

    fn canon(text: &str) -> String {
        let v = decode(text.as_bytes(), &DecodeBounds::MAX).expect("json");
        String::from_utf8(encode(&v)).expect("utf8")
    }

    fn num(f: f64) -> String {
        let mut s = String::new();
        write_number(&mut s, Number::float(f).expect("finite"));
        s
    }

    #[test]
    fn numbers_follow_ecmascript_formatting() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.0e22), "1e+22");
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(5.0e-324), "5e-324");
        assert_eq!(num(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(num(1e21), "1e+21");
        assert_eq!(num(1e20), "100000000000000000000");
        assert_eq!(num(1e-7), "1e-7");
        assert_eq!(num(1e-6), "0.000001");
        assert_eq!(num(0.1), "0.1");
        assert_eq!(num(123.456), "123.456");
        assert_eq!(num(-1.5), "-1.5");
        assert_eq!(num(295147905179352830000.0), "295147905179352830000");
        assert_eq!(num(4.5e15), "4500000000000000");
        assert_eq!(num(1.2345e-10), "1.2345e-10");
    }

    #[test]
    fn members_sort_by_utf16_code_units_not_utf8_bytes() {
        assert_eq!(
            canon("{\"\u{FF3A}\":1,\"\u{10000}\":2}"),
            "{\"\u{10000}\":2,\"\u{FF3A}\":1}"
        );
        assert_eq!(canon(r#"{"b":1,"a":2,"aa":3}"#), r#"{"a":2,"aa":3,"b":1}"#);
    }

    #[test]
    fn strings_use_minimal_escapes() {
        assert_eq!(
            canon(r#""\u0001\u001f\b\f\n\r\t\"\\\/\u00e9\u007f""#),
            "\"\\u0001\\u001f\\b\\f\\n\\r\\t\\\"\\\\/é\u{7f}\""
        );
    }

    #[test]
    fn rfc8785_appendix_b_sample_canonicalizes() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        assert_eq!(
            canon(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn the_encoder_bytes_ceiling_applies_to_output() {
        let v = decode(br#"{"a":1}"#, &DecodeBounds::MAX).expect("json");
        assert!(encode_bounded(&v, 7).is_ok());
        assert_eq!(
            encode_bounded(&v, 6).expect_err("over").code,
            Code::Ceiling(CeilingKey::Bytes)
        );
    }
}
