/** What parsing a message yields: shared by the parser, bounce detection and their callers. */

export interface ParsedAddress {
  /** As written; compare with normalizeAddress(). */
  address: string;
  name: string;
}

export interface ParsedAttachment {
  filename: string;
  /** Lower case, without the dot; empty when the name has none. */
  extension: string;
  mime: string;
  content: Uint8Array;
  /** Decoded size in bytes. */
  size: number;
  /** Content-ID without angle brackets. */
  cid: string | null;
  inline: boolean;
}

export interface BounceInfo {
  original_message_id: string | null;
  recipient: string;
  status: string;
  action: string;
  diagnostic: string;
}

export interface ParsedMessage {
  message_id: string | null;
  in_reply_to: string | null;
  references: string[];
  subject: string;
  date_ms: number | null;
  from: ParsedAddress | null;
  to: ParsedAddress[];
  cc: ParsedAddress[];
  bcc: ParsedAddress[];
  reply_to: ParsedAddress[];
  html: string;
  plain: string;
  snippet: string;
  headers: { name: string; value: string }[];
  /** Bytes of the header block at the start of the source (line ends as parsed). */
  header_length: number;
  attachments: ParsedAttachment[];
  has_attachments: boolean;
  fingerprint: string;
  bounce: BounceInfo | null;
}
