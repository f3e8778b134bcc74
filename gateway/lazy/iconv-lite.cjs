// iconv-lite for the gateway bundle (see lazy-module.cjs): imapflow and libmime import it, and
// imapflow uses it for folder names with characters outside ASCII (modified UTF-7) and charset
// conversions; half a megabyte of code and tables that a mailbox with ASCII folder names never needs.
const { lazyModule } = require('./lazy-module.cjs');

module.exports = lazyModule(() => require('iconv-lite'));
