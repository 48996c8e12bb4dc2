//! YOURLS 1.9's tables, for the tests that import from a real YOURLS database (the importer's
//! own tests and the migration guide's): one copy of the peer's schema.

/// The tables as YOURLS's installer (yourls-install.php, 1.9) creates them, prefix `yourls_`.
pub const SCHEMA: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS `yourls_url` (
        `keyword` varchar(100) BINARY NOT NULL,
        `url` text BINARY NOT NULL,
        `title` text CHARACTER SET utf8mb4,
        `timestamp` timestamp NOT NULL DEFAULT current_timestamp(),
        `ip` varchar(41) NOT NULL,
        `clicks` int(10) unsigned NOT NULL,
        PRIMARY KEY (`keyword`),
        KEY `ip` (`ip`),
        KEY `timestamp` (`timestamp`)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
    "CREATE TABLE IF NOT EXISTS `yourls_log` (
        `click_id` int(11) NOT NULL auto_increment,
        `click_time` datetime NOT NULL,
        `shorturl` varchar(100) BINARY NOT NULL,
        `referrer` varchar(200) NOT NULL,
        `user_agent` varchar(255) NOT NULL,
        `ip_address` varchar(41) NOT NULL,
        `country_code` char(2) NOT NULL,
        PRIMARY KEY (`click_id`),
        KEY `shorturl` (`shorturl`)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
];
