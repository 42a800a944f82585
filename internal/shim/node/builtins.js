'use strict';
// builtins.js: patches of Node's built-in modules applied when the program
// first loads the module, not when the shim starts. node:crypto alone costs
// ~3 ms to load, perf_hooks ~0.8 ms: a program that never uses them should
// not pay for them.
//
// A patch must be in place before the program can see the module's
// exports, whichever way it gets them:
//
//   require('crypto'), require('node:crypto'), createRequire, node -e's
//       builtin globals: all go through Module._load, wrapped here; the
//       patch runs before require returns
//   process.getBuiltinModule(id): wrapped the same way
//   globals that load a builtin (globalThis.crypto, performance, FormData,
//       ...): their lazy getters are wrapped; the original accessor is put
//       back once the patch ran
//   ES modules (import, import(), require of an ES module): Node 20 has no
//       hook on an ES module's load of a builtin, and its facade binds the
//       named exports then. So every pending patch runs, synchronously, the
//       moment Node starts its ES module loader, before it resolves
//       anything: the loader's modules read two binding functions only they
//       use (fs.legacyMainResolve, contextify.compileFunctionForCJSLoader),
//       and those reads are watched. An ES module program therefore pays
//       for every patch at its start, as before this file existed.
//   Node's own modules using crypto: fetch's undici draws at a call, from
//       node:crypto's exports, so the patch is in place once the program
//       has touched FormData, WebSocket or EventSource (watched globals) or
//       crypto itself. Not reported: TLS's randomness.
//
// When a watch cannot be set (another Node version), every patch runs at
// once: slower, never unpatched.

module.exports = { lazyBuiltins, quietBinding };

// quietBinding returns process.binding(name) without DEP0111's warning on
// the agent's stderr (process.binding warns for crypto, and for any binding
// under --pending-deprecation), or null.
function quietBinding(name) {
  const saved = process.noDeprecation;
  try {
    process.noDeprecation = true;
    return process.binding(name);
  } catch {
    return null;
  } finally {
    process.noDeprecation = saved;
  }
}

// lazyBuiltins returns { patch, beforeGet, whenGlobal, settleAll }:
// patch(id, fn) runs fn(exports of builtin id) before the program can see
// them (see above). Module is Node's CommonJS Module class, req a require
// function, say the shim's one-line reporter.
// Preconditions: called before any program code ran.
function lazyBuiltins(Module, req, say) {
  const pending = new Map(); // builtin id -> [patch]
  const restores = []; // put back what the watches replaced
  let esm = false; // the ES module loader started: patch at once

  function settle(id) {
    const fns = pending.get(id);
    if (fns === undefined) return;
    pending.delete(id);
    const exports = req(id);
    for (const fn of fns) {
      try {
        fn(exports);
      } catch (e) {
        say(`could not patch node:${id} (${e && e.message}); it may run unvirtualized`);
      }
    }
    if (pending.size === 0) unwatch();
    try {
      // ES module facades made before (import of another builtin's
      // dependency, say) read the patched exports.
      Module.syncBuiltinESMExports();
    } catch {
      // nothing imported yet
    }
  }

  function settleAll() {
    esm = true;
    for (const id of [...pending.keys()]) settle(id);
  }

  function unwatch() {
    while (restores.length > 0) restores.pop()();
  }

  // Module._load and process.getBuiltinModule: patch before returning.
  const nativeLoad = Module._load;
  const idOf = (request) => (typeof request === 'string' && request.startsWith('node:') ? request.slice(5) : request);
  Module._load = function _load(request, parent, isMain) {
    const exports = Reflect.apply(nativeLoad, this, arguments);
    if (pending.size > 0 && pending.has(idOf(request))) {
      settle(idOf(request));
    }
    return exports;
  };
  const nativeGetBuiltin = process.getBuiltinModule;
  if (typeof nativeGetBuiltin === 'function') {
    process.getBuiltinModule = function getBuiltinModule(id) {
      const exports = Reflect.apply(nativeGetBuiltin, this, arguments);
      if (pending.size > 0 && exports !== undefined && pending.has(idOf(id))) settle(idOf(id));
      return exports;
    };
  }

  // watch(obj, key, fn) calls fn at the first read of obj[key], a data
  // property, which is put back as it was. false: it could not be watched.
  function watch(obj, key, fn) {
    const d = obj && Object.getOwnPropertyDescriptor(obj, key);
    if (!d || !d.configurable || !('value' in d)) return false;
    const restore = () => Object.defineProperty(obj, key, d);
    Object.defineProperty(obj, key, {
      get() {
        restore();
        fn();
        return d.value;
      },
      set(v) {
        restore();
        obj[key] = v;
      },
      enumerable: d.enumerable,
      configurable: true,
    });
    restores.push(restore);
    return true;
  }

  // The ES module loader: its first module to resolve reads
  // fs.legacyMainResolve, its translators read compileFunctionForCJSLoader.
  const startESM = () => {
    if (!esm) settleAll();
  };
  const fsBinding = quietBinding('fs');
  const contextify = quietBinding('contextify');
  const watched = [watch(fsBinding, 'legacyMainResolve', startESM), watch(contextify, 'compileFunctionForCJSLoader', startESM)];
  if (!watched.every(Boolean) || process.moduleLoadList.includes('NativeModule internal/modules/esm/loader')) {
    esm = true; // no watch, or the loader runs already: patch at once
  }

  return {
    // patch registers fn for builtin id (one of the public ones); it runs
    // at once when the module is loaded already or the ES module loader
    // runs.
    patch(id, fn) {
      if (!pending.has(id)) pending.set(id, []);
      pending.get(id).push(fn);
      if (esm || process.moduleLoadList.includes(`NativeModule ${id}`)) settle(id);
    },
    // beforeGet(obj, name, id): reading obj[name], a lazy getter of Node's
    // (globalThis.crypto, require('timers').promises), settles id first.
    beforeGet(obj, name, id) {
      if (!pending.has(id)) return;
      const d = Object.getOwnPropertyDescriptor(obj, name);
      if (!d || typeof d.get !== 'function' || !d.configurable) return;
      const get = function () {
        Object.defineProperty(obj, name, d);
        settle(id);
        return Reflect.apply(d.get, this, []);
      };
      Object.defineProperty(get, 'name', { value: d.get.name });
      Object.defineProperty(obj, name, { get, set: d.set, enumerable: d.enumerable, configurable: true });
      restores.push(() => {
        const now = Object.getOwnPropertyDescriptor(obj, name);
        if (now && now.get === get) Object.defineProperty(obj, name, d);
      });
    },
    // whenGlobal(names, fn) runs fn() once, before the first read of any
    // of globalThis[names] (lazy getters of Node's: AbortSignal,
    // AbortController), or at once if one is not lazy any more.
    whenGlobal(names, fn) {
      const ds = names.map((name) => [name, Object.getOwnPropertyDescriptor(globalThis, name)]);
      if (!ds.every(([, d]) => d && typeof d.get === 'function' && d.configurable)) {
        fn();
        return;
      }
      let ran = false;
      const run = () => {
        if (ran) return;
        ran = true;
        for (const [name, d] of ds) Object.defineProperty(globalThis, name, d);
        fn();
      };
      for (const [name, d] of ds) {
        const get = function () {
          run();
          return Reflect.apply(d.get, this, []);
        };
        Object.defineProperty(get, 'name', { value: d.get.name });
        Object.defineProperty(globalThis, name, { get, set: d.set, enumerable: d.enumerable, configurable: true });
      }
    },
    settleAll,
  };
}
