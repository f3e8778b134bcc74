// A stand-in for a dependency that the gateway's libraries import when they load but that the
// gateway rarely or never uses: the real module is loaded and initialised the first time one of its
// properties is read or it is called. When scripts/build-gateway.mjs bundles the gateway, imports of
// such packages get the files beside this one, and the real packages stay in node_modules.
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
    apply(_target, self, args) {
      return Reflect.apply(module(), self, args);
    },
  });
}

module.exports = { lazyModule };
