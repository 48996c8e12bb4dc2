-- The hosts a link can send to besides its target's (issue 79): its not-yet and expired targets
-- and its click-time rules' targets and split variants, one row per host key (the form of
-- `links.target_host`: labels reversed, a final dot) and code, so a feed's new entry finds the
-- links that can redirect to it in one range of this index, as `links_target_host` does for
-- targets. Written by the sidecar with the link (most links have none); links stored before
-- it have none until their next change.
CREATE TABLE link_destination_hosts (
    host_key    TEXT COLLATE "C" NOT NULL,
    code        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (host_key, code)
);
CREATE INDEX link_destination_hosts_code ON link_destination_hosts (code);
