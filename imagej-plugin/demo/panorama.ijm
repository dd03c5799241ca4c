// Demo for the real-window check (screenshot.sh): cut a video-like sweep of 12 frames out
// of a photograph, then stitch it back with Plugins > Tessera > Panorama (NCC log search).
// DATA is replaced by screenshot.sh with the shared data folder, DONEFILE by a file the
// script waits for.
setBatchMode(true);
open("DATA/stereo/cones/im2.png");
src = getImageID();
n = 12; fw = 200; fh = 150;
newImage("sweep", "RGB black", fw, fh, n);
seq = getImageID();
for (i = 0; i < n; i++) {
    x = 10 + round(i * 230 / (n - 1));
    y = 8 + round(i * 200 / (n - 1) + 12 * sin(i));
    selectImage(src);
    makeRectangle(x, y, fw, fh);
    run("Copy");
    selectImage(seq);
    setSlice(i + 1);
    run("Paste");
    setMetadata("Label", "x" + x + " y" + y);
}
run("Select None");
selectImage(src);
close();
selectImage(seq);
setSlice(6);
setBatchMode("exit and display");
run("Panorama (NCC log search)...", "rsz=25 cthresh=0.85 npts=6 radius=32 search=log motion=similarity blend=feather keyframe=0.25 minimum=4 subpixel backend=auto");
File.saveString("done", "DONEFILE");
