//! tessera-jni: JNI entry points for the ImageJ plugin (class `tessera.ij.Native`).
