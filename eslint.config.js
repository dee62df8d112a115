// Lint rules: typescript-eslint's recommended set, plus the rules that keep `any` off the request path.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'generated/', 'bench/results/', '.data/', '.scratch/'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-console': ['error', { allow: ['error', 'warn'] }],
    },
  },
  {
    files: ['src/cli/**', 'bench/**', 'scripts/**', 'bin/**'],
    rules: { 'no-console': 'off' },
  },
);
