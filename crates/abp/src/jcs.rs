//! RFC 8785 JSON Canonicalization Scheme (spec 4): UTF-16 member order, ECMAScript number
//! formatting, minimal string escaping.

use std::cmp::Ordering;
use std::fmt::Write as _;

use crate::error::{CeilingKey, Code, Error, Result};
use crate::json::{Number, Value};

/// The canonical bytes of `value`.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = String::with_capacity(128);
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

/// Compare member names as sequences of UTF-16 code units (RFC 8785 3.2.3).
pub fn utf16_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    let mut ai = a.chars();
    let mut bi = b.chars();
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => return first_unit(x).cmp(&first_unit(y)).then(x.cmp(&y)),
        }
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
            let mut members: Vec<(&String, &Value)> = o.iter().collect();
            members.sort_by(|a, b| utf16_cmp(a.0, b.0));
            out.push('{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// Write a string with the RFC 8785 3.2.2.2 escapes.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Write a number in ECMAScript `Number::toString` form (ECMA-262 7.1.12.1, RFC 8785 3.2.2.3).
pub fn write_number(out: &mut String, n: Number) {
    let f = match n {
        Number::Int(i) => {
            let _ = write!(out, "{i}");
            return;
        }
        Number::Float(f) => f.get(),
    };
    if f == 0.0 {
        out.push('0');
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    // Shortest round-trip digits: Rust's `{:e}` yields `d[.ddd]e<exp>`.
    // Shortest round-trip digit count k from `{:e}`; then the k-digit decimal closest to the value
    // (exact formatting rounds half to even), which is ECMA-262 Note 2's choice among candidates.
    let mut sci = String::with_capacity(32);
    let _ = write!(sci, "{:e}", f.abs());
    let k = sci
        .split_once('e')
        .map_or(1, |(m, _)| m.bytes().filter(u8::is_ascii_digit).count());
    sci.clear();
    let _ = write!(sci, "{:.*e}", k.saturating_sub(1), f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    let n = exp + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
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
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        let _ = write!(out, "{}", (n - 1).abs());
    }
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
