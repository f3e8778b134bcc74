// A stand-in for a dependency that the gateway's libraries import when they load but that the
// gateway rarely or never uses: the real module is loaded and initialised the first time one of its
// properties is read or it is called. When scripts/build-gateway.mjs bundles the gateway, imports of
// such packages get the files beside this one, and the real packages stay in node_modules.
// It serves a default import or a require() (what imapflow and libmime do: test/node/lazy-modules
// checks it); a named ES import would copy the stand-in's own properties when it loads and get none.
function lazyModule(load) {
  let real;
  const module = () => {
    real ??= load();
    return real;
  };
  return new Proxy(function lazy() {}, {
    get(_target, key) {
      // Bundlers' interop asks whether this is an ES module when it is imported: not a use.
      if (key === '__esModule') return undefined;
      return module()[key];
    },
    has(_target, key) {
      return key in module();
    },
    apply(_target, self, args) {
      return Reflect.apply(module(), self, args);
    },
    construct(_target, args) {
      return Reflect.construct(module(), args);
    },
  });
}

module.exports = { lazyModule };
