/** Tar archives in memory: packing files and directories, reading one back (tests, solutions, files). */
export {
  openArchive,
  overlayFiles,
  packDirectory,
  singleFileTar,
  type TestsArchive,
} from "./archive.ts"
export { collectBytes, packFiles } from "./bytes.ts"
