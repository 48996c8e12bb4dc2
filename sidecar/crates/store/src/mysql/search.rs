//! The FULLTEXT query behind MariaDB's link search: InnoDB's index holds words (letters, digits
//! and `_`), so the text becomes its words, each required and matched by its beginning.

/// InnoDB's default stopwords of 3 letters or more: never indexed, so never required.
const STOPWORDS: &[&str] = &[
    "about", "are", "com", "for", "from", "how", "that", "the", "this", "was", "what", "when",
    "where", "who", "will", "with", "und", "www",
];

/// Words the index holds (3 characters or more, the default `innodb_ft_min_token_size`).
const MIN_WORD: usize = 3;

/// `+word* +word*` for the words of `text` the index can find; empty when there are none.
pub(super) fn required_words(text: &str) -> String {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| word.chars().count() >= MIN_WORD && !STOPWORDS.contains(word))
        .map(|word| format!("+{word}*"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::required_words;

    #[test]
    fn words_the_index_holds_are_required_by_their_beginning() {
        assert_eq!(
            required_words("shop.example/spring?utm_campaign=x"),
            "+shop* +example* +spring* +utm_campaign*"
        );
        assert_eq!(required_words("www.a.com/the-sale"), "+sale*");
        assert_eq!(required_words("r-1"), "");
    }
}
