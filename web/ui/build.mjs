// Bundles the UI into ../dist (embedded in the rtmon binary by go:embed).
// Run through `make ui`; nothing here fetches anything at build time.
import * as esbuild from 'esbuild';

await esbuild.build({
  entryPoints: { app: 'src/main.js' },
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'iife',
  target: ['es2020'],
  outdir: '../dist',
  loader: { '.css': 'css' },
  legalComments: 'none',
  logLevel: 'info',
});
