import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One real stack (PostgreSQL, Temporal, demo sites, API, worker) for the whole run.
    globalSetup: ['test/helpers/global-setup.ts'],
    // Two cores: files run one after another so timing-sensitive tests are not starved.
    fileParallelism: false,
    testTimeout: 150_000,
    hookTimeout: 180_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
