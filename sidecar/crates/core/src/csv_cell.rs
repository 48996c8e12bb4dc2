//! CSV cells that a spreadsheet opens as text, never as a formula (CSV injection, OWASP): every
//! CSV the sidecar writes with text someone else chose (a recipient's `ref`, a message, a phone,
//! an error quoting them) goes through [`neutralise`], the console's downloads and compose's
//! answer alike.

use std::borrow::Cow;

/// `value` with a `'` in front when a spreadsheet would read it as a formula: a leading `=`,
/// `+`, `-`, `@`, tab or carriage return. A plain signed integer (`+33612345678`, `-5`) is kept:
/// a spreadsheet reads it as a number and runs nothing, and phones stay as compose wrote them.
pub fn neutralise(value: &str) -> Cow<'_, str> {
    let risky = value.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let number = |v: &str| {
        let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    match risky && !number(value) {
        true => Cow::Owned(format!("'{value}")),
        false => Cow::Borrowed(value),
    }
}

/// One neutralised CSV field appended to `out`, quoted when it needs to be.
pub fn push_field(out: &mut String, value: &str) {
    let value = neutralise(value);
    if value.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&value.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(&value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_and_never_formulas() {
        let field = |value: &str| {
            let mut out = String::new();
            push_field(&mut out, value);
            out
        };
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(field("+1+cmd|' /C calc'!A0"), "'+1+cmd|' /C calc'!A0");
        assert_eq!(field("-2+3"), "'-2+3");
        assert_eq!(field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(field("\t=1"), "'\t=1");
        assert_eq!(field("\r=1"), "\"'\r=1\"");
        assert_eq!(field("+33612345678"), "+33612345678");
        assert_eq!(field("-5"), "-5");
        assert_eq!(field("+"), "'+");
    }
}
