/**
 * The image a task runs in when it names none (native tasks): t1's offline-built base with the
 * shell tools and Python with pytest. Built by the sandbox actor's image code (`t1 image
 * build-base`); named here so that loading a task needs no actor.
 */
export const BASE_REPOSITORY = "t1-base"
export const BASE_IMAGE = `${BASE_REPOSITORY}:latest`
