// Reads messages (one JSON string a line) from the file named by argv[2] and writes, for each,
// one tab-separated line to stdout as sms-segments-calculator sees it:
//   encoding  segments-by-code-point  segments-by-grapheme  characters  clusters  parts
// - encoding: "GSM-7" or "UCS-2".
// - segments-by-grapheme: the package as published. It never splits a grapheme cluster (a flag,
//   a ZWJ emoji sequence, a letter with a combining mark) across parts, which is Twilio's
//   practice, not TS 23.040's: the standard concatenates octets, and the only units that must
//   stay whole are a GSM escape with its character and a UTF-16 surrogate pair.
// - segments-by-code-point: the package's own encoder and segment builder, fed code points
//   instead of grapheme clusters: the standard's rule, which shortlink-sms follows.
// - characters: the package's numberOfCharacters (septets for GSM-7, clusters for UCS-2).
// - clusters: 1 if some grapheme cluster holds more than one code point (where the two counts
//   above may differ), else 0.
// - parts: code points in each part of the split by code point, comma-separated.
'use strict';
const fs = require('fs');
const readline = require('readline');
const { SegmentedMessage } = require('sms-segments-calculator');

async function main() {
  const input = readline.createInterface({ input: fs.createReadStream(process.argv[2]), crlfDelay: Infinity });
  const out = [];
  for await (const line of input) {
    const text = JSON.parse(line);
    const m = new SegmentedMessage(text, 'auto', false);
    const codePoints = Array.from(text);
    // The clusters partition the text, so as many clusters as code points means they are the
    // code points, and the published count is already the one by code point.
    const clusters = m.graphemes.length !== codePoints.length ? 1 : 0;
    const segments = clusters ? m._buildSegments(m._encodeChars(codePoints)) : m.segments;
    // A segment holds its UDH placeholders and one encoded character per code point.
    const parts = segments.map((s) => s.filter((c) => !c.isUserDataHeader).length).join(',');
    out.push(`${m.encodingName}\t${segments.length}\t${m.segmentsCount}\t${m.numberOfCharacters}\t${clusters}\t${parts}`);
    if (out.length >= 10000) {
      process.stdout.write(out.join('\n') + '\n');
      out.length = 0;
    }
  }
  if (out.length) process.stdout.write(out.join('\n') + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
