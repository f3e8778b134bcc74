// encoding-japanese for the gateway bundle (see lazy-module.cjs): imapflow and libmime import it,
// and initialising it builds its Japanese conversion tables (about 3.5 MiB). The gateway relays raw
// sources; it would decode Japanese text only in an envelope or a download, which it never asks for.
const { lazyModule } = require('./lazy-module.cjs');

module.exports = lazyModule(() => require('encoding-japanese'));
