-- An email's bodies and header block as one compressed BLOB (deflate-raw of their JSON,
-- worker/emails/content.ts): new rows keep `body_html` and `body_plain` null and `headers_json` '[]'.
-- Rows written before keep their text columns (content null); readers take either form.
ALTER TABLE emails ADD COLUMN content BLOB;
