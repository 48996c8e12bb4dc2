//! Hosts that read as one of the brands' own but are not: `brаnd.example` with a Cyrillic `а`
//! (`xn--brnd-…`), `rnybank.example` for `mybank.example`. Each host is reduced to a skeleton
//! (Unicode decoded from punycode, confusable letters and digits folded to one Latin letter, in
//! the spirit of Unicode's UTS #39 skeleton, for the scripts phishing uses most) and compared with
//! the skeletons of the brands' hosts.

use crate::normalize;

/// The skeleton of a (punycode) host.
pub fn skeleton(host: &str) -> String {
    let unicode = url::quirks::domain_to_unicode(host);
    let folded: String = unicode.chars().map(fold).collect();
    folded.replace("rn", "m").replace("vv", "w")
}

fn fold(c: char) -> char {
    match c {
        // Cyrillic.
        'а' => 'a',
        'в' => 'b',
        'с' => 'c',
        'ԁ' => 'd',
        'е' | 'ё' => 'e',
        'һ' => 'h',
        'і' | 'ї' => 'i',
        'ј' => 'j',
        'к' => 'k',
        'ӏ' => 'l',
        'м' => 'm',
        'п' => 'n',
        'о' => 'o',
        'р' => 'p',
        'ԛ' => 'q',
        'ѕ' => 's',
        'т' => 't',
        'ц' => 'u',
        'ѵ' => 'v',
        'ԝ' => 'w',
        'х' => 'x',
        'у' => 'y',
        // Greek.
        'α' => 'a',
        'β' => 'b',
        'ε' => 'e',
        'η' => 'n',
        'ι' => 'i',
        'κ' => 'k',
        'ν' => 'v',
        'ο' => 'o',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        // Latin with marks, and digits read as letters.
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' | 'ı' => 'i',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        'ç' => 'c',
        'ñ' => 'n',
        'ý' | 'ÿ' => 'y',
        '0' => 'o',
        '1' => 'l',
        '|' => 'l',
        other => other,
    }
}

/// The brand host `host` (or one of its parents) imitates, if any: same skeleton, another name.
pub fn imitated<'b>(host: &str, brands: &'b [(String, String)]) -> Option<&'b str> {
    if brands.is_empty() {
        return None;
    }
    normalize::self_and_parents(host).find_map(|name| {
        let shape = skeleton(name);
        brands
            .iter()
            .find(|(brand, brand_shape)| *brand_shape == shape && brand != name)
            .map(|(brand, _)| brand.as_str())
    })
}

/// Brand hosts with their skeletons, computed once.
pub fn brands(hosts: &[String]) -> Vec<(String, String)> {
    hosts
        .iter()
        .filter_map(|host| normalize::host(host))
        .map(|host| {
            let shape = skeleton(&host);
            (host, shape)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punycode_and_digit_look_alikes_are_caught() {
        let brands = brands(&["mybank.example".into()]);
        let cyrillic = normalize::host("mybаnk.example").unwrap();
        assert!(cyrillic.starts_with("xn--"));
        assert_eq!(imitated(&cyrillic, &brands), Some("mybank.example"));
        assert_eq!(
            imitated("login.rnybank.example", &brands),
            Some("mybank.example")
        );
        assert_eq!(imitated("myb4nk.example", &brands), None);
        assert_eq!(imitated("mybank.example", &brands), None);
        assert_eq!(imitated("www.mybank.example", &brands), None);
    }
}
