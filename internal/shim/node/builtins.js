'use strict';
// builtins.js: patches of Node's built-in modules applied right after Node
// loads the module, not when the shim starts. node:crypto alone costs ~3 ms
// to load, perf_hooks ~0.8 ms: a program that never uses them should not
// pay for them.
//
// A patch must be in place before anything can see the module's exports,
// whichever way it gets them: require, process.getBuiltinModule, an ES
// module's import (its facade binds the named exports once, when made), a
// global's lazy getter (globalThis.crypto, performance, AbortSignal), or
// Node's own modules (fetch's undici loads node:crypto). Every one of those
// loads the module through Node's builtin loader, which appends
// "NativeModule <id>" to process.moduleLoadList once the module's code has
// run and before it returns the exports to anyone. The shim puts a Proxy
// between that array and Array.prototype whose set trap sees the append (a
// push to an array sets its next index, which the array does not have, so
// the set reaches the prototype chain): the patch runs there,
// synchronously. process.moduleLoadList stays an array with the same
// entries (Array.isArray, instanceof Array); only its prototype differs.
//
// A patch must not load another builtin: that load would append to the
// array during the append, whose own length update then drops the entry.
// Such entries are put back in a microtask (safety net; the shim's patches
// load nothing).
//
// When the array is not what this expects (another Node version), every
// patch runs at once: slower, never unpatched.

module.exports = { loadHooks };

const PREFIX = 'NativeModule ';

// loadHooks returns { after(id, fn), hooked }: after(id, fn) runs fn() right
// after Node loads builtin id (a public one such as 'crypto', or an
// internal one such as 'internal/crypto/webcrypto'), or at once when it is
// loaded already or the hook could not be set. hooked says whether it
// could. say is the shim's one-line reporter.
// Preconditions: called before any program code ran.
function loadHooks(say) {
  const list = process.moduleLoadList;
  const loaded = new Set();
  const pending = new Map(); // id -> [fn]
  const hooked = install();

  function run(id) {
    const fns = pending.get(id);
    if (fns === undefined) return;
    pending.delete(id);
    for (const fn of fns) {
      try {
        fn();
      } catch (e) {
        say(`could not patch node:${id} (${e && e.message}); it may run unvirtualized`);
      }
    }
  }

  function install() {
    if (!Array.isArray(list) || Object.getPrototypeOf(list) !== Array.prototype || !Object.isExtensible(list)) return false;
    for (const entry of list) {
      if (typeof entry === 'string' && entry.startsWith(PREFIX)) loaded.add(entry.slice(PREFIX.length));
    }
    let depth = 0;
    let dropped = null; // entries appended during an append, put back later
    const proto = new Proxy(Object.create(Array.prototype), {
      set(target, key, value, receiver) {
        if (receiver !== list) return Reflect.set(target, key, value, receiver);
        Object.defineProperty(list, key, { value, writable: true, enumerable: true, configurable: true });
        if (depth > 0) (dropped ??= []).push(value);
        if (typeof value === 'string' && value.startsWith(PREFIX)) {
          const id = value.slice(PREFIX.length);
          loaded.add(id);
          if (pending.has(id)) {
            depth++;
            try {
              run(id);
            } finally {
              depth--;
            }
            if (depth === 0 && dropped !== null) {
              const lost = dropped;
              dropped = null;
              queueMicrotask(() => {
                for (const entry of lost) if (!list.includes(entry)) Array.prototype.push.call(list, entry);
              });
            }
          }
        }
        return true;
      },
    });
    try {
      Object.setPrototypeOf(list, proto);
    } catch {
      return false;
    }
    return true;
  }

  return {
    hooked,
    after(id, fn) {
      if (!pending.has(id)) pending.set(id, []);
      pending.get(id).push(fn);
      if (!hooked || loaded.has(id)) run(id);
    },
  };
}
