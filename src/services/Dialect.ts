/** Retiring: the locking differences live in `store/Locking.ts`; this file goes once nothing imports it. */
export { forUpdate, serialize } from "./store/Locking.js"
